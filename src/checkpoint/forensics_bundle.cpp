// Forensics bundles: written like a checkpoint, read back field by field with every value checked.
#include "checkpoint/forensics_bundle.h"

#include <cctype>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_dir.h"
#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/run_files.h"
#include "io/safetensors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

constexpr const char* kBatchFields[] = {"tokens", "positions", "segment_ids", "key_valid", "labels"};

at::Tensor* field(Batch& b, const std::string& name) {
  if (name == "tokens") return &b.tokens;
  if (name == "positions") return &b.positions;
  if (name == "segment_ids") return &b.segment_ids;
  if (name == "key_valid") return &b.key_valid;
  if (name == "labels") return &b.labels;
  return nullptr;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  const nlohmann::json value = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) throw CheckpointError("[forensics] cannot read " + path.string());
  return value;
}

// "mb<i>.<field>" -> i, or -1 when the name is not of that form.
int64_t micro_batch_index(const std::string& name) {
  const size_t dot = name.find('.');
  if (name.rfind("mb", 0) != 0 || dot == std::string::npos || dot == 2 || dot > 8) return -1;
  int64_t index = 0;
  for (size_t i = 2; i < dot; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
    index = index * 10 + (name[i] - '0');
  }
  return index;
}

}  // namespace

fs::path write_forensics(const fs::path& run_dir, const ForensicsBundle& bundle, torch::nn::Module& model,
                         const torch::optim::Optimizer& optimizer) {
  NamedTensors batch;
  for (size_t i = 0; i < bundle.micro_batches.size(); ++i) {
    Batch b = bundle.micro_batches[i];
    for (const char* name : kBatchFields) {
      const at::Tensor& t = *field(b, name);
      if (t.defined()) batch.emplace_back("mb" + std::to_string(i) + "." + name, t);
    }
  }
  nlohmann::json state = {{"step", bundle.step},
                          {"lr", bundle.lr},
                          {"message", bundle.message},
                          {"micro_batches", bundle.micro_batches.size()},
                          {"rng", bundle.rng_before},
                          {"fault", bundle.fault},
                          {"last_checkpoint", bundle.last_checkpoint}};
  if (bundle.threads) state["threads"] = thread_split_to_json(*bundle.threads);
  if (bundle.base) state["base"] = bundle.base->to_json();
  const fs::path root = run_dir / run_files::kForensics;
  fs::create_directories(root);
  fs::remove_all(root /
                 checkpoint_name(bundle.step));  // a replayed abort of the same step replaces its bundle
  return commit_checkpoint(root, bundle.step, [&](const fs::path& dir) {
    save_safetensors((dir / "batch.safetensors").string(), batch);
    write_training_tensors(dir, model, optimizer, bundle.step - 1, /*adapter_only=*/bundle.base.has_value());
    write_file_synced(dir / "state.json", state.dump(2) + "\n");
    write_file_synced(dir / "config.json", bundle.config.dump(2) + "\n");
  });
}

ForensicsBundle read_forensics(const fs::path& dir) {
  verify_checkpoint(dir);
  ForensicsBundle bundle;
  const nlohmann::json state = read_json(dir / "state.json");
  try {
    bundle.step = state.at("step").get<int64_t>();
    bundle.lr = state.at("lr").get<double>();
    bundle.message = state.at("message").get<std::string>();
    bundle.micro_batches.resize(state.at("micro_batches").get<size_t>());
    bundle.rng_before = state.at("rng");
    bundle.fault = state.at("fault").get<std::string>();
    bundle.last_checkpoint = state.at("last_checkpoint").get<std::string>();
    if (state.contains("threads")) bundle.threads = thread_split_from_json(state.at("threads"), dir.string());
    if (state.contains("base"))
      bundle.base = BaseCheckpoint::from_json(state.at("base"), (dir / "state.json").string());
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("[forensics] " + (dir / "state.json").string() +
                          ": missing or mistyped field: " + e.what());
  }
  bundle.config = read_json(dir / "config.json");
  for (auto& [name, tensor] : load_safetensors((dir / "batch.safetensors").string())) {
    const int64_t index = micro_batch_index(name);
    at::Tensor* slot =
        index >= 0 && index < static_cast<int64_t>(bundle.micro_batches.size())
            ? field(bundle.micro_batches[static_cast<size_t>(index)], name.substr(name.find('.') + 1))
            : nullptr;
    if (slot == nullptr)
      throw CheckpointError("[forensics] unexpected tensor " + name + " in batch.safetensors");
    *slot = tensor;
  }
  return bundle;
}

void load_forensics_weights(const fs::path& dir, const ForensicsBundle& bundle, torch::nn::Module& model) {
  CheckpointInfo weights{dir, bundle.config, TrainingState{}};
  weights.state.base = bundle.base;
  load_model_weights(weights, model);
}

}  // namespace causal
