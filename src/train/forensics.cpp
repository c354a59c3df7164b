// Forensics bundles and their replay.
#include "train/forensics.h"

#include <fstream>

#include "config/config_io.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"
#include "train/checkpoint_error.h"
#include "train/runtime.h"
#include "train/safetensors.h"

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

}  // namespace

fs::path write_forensics(const fs::path& run_dir, const AbortedStep& step, torch::nn::Module& model,
                         const torch::optim::Optimizer& optimizer, const nlohmann::json& config,
                         const std::string& last_checkpoint, const FaultInjection& fault) {
  NamedTensors batch;
  for (size_t i = 0; i < step.micro_batches->size(); ++i) {
    Batch b = (*step.micro_batches)[i];
    for (const char* name : kBatchFields) {
      const at::Tensor& t = *field(b, name);
      if (t.defined()) batch.emplace_back("mb" + std::to_string(i) + "." + name, t);
    }
  }
  const nlohmann::json state = {{"step", step.step},
                                {"lr", step.lr},
                                {"message", step.message},
                                {"micro_batches", step.micro_batches->size()},
                                {"rng", step.rng_before},
                                {"fault", fault.kind == FaultInjection::Kind::kNone ? "" : fault.describe()},
                                {"last_checkpoint", last_checkpoint}};
  const fs::path root = run_dir / "forensics";
  fs::create_directories(root);
  fs::remove_all(root / checkpoint_name(step.step));  // a replayed abort of the same step replaces its bundle
  return commit_checkpoint(root, step.step, [&](const fs::path& dir) {
    save_safetensors((dir / "batch.safetensors").string(), batch);
    write_training_tensors(dir, model, optimizer, step.step - 1);
    write_text_file(dir / "state.json", state.dump(2) + "\n");
    write_text_file(dir / "config.json", config.dump(2) + "\n");
  });
}

ReplayResult replay_step(const fs::path& bundle) {
  verify_checkpoint(bundle);
  const nlohmann::json state = read_json(bundle / "state.json");
  const RunConfig config =
      parse_config_text(read_json(bundle / "config.json").dump(), (bundle / "config.json").string());
  configure_threads(config.threads);
  const c10::Device device = resolve_device(config.device);

  ReplayResult result;
  result.step = state.at("step").get<int64_t>();
  result.original_message = state.at("message").get<std::string>();
  std::vector<Batch> micro_batches(state.at("micro_batches").get<size_t>());
  for (auto& [name, tensor] : load_safetensors((bundle / "batch.safetensors").string())) {
    const auto dot = name.find('.');
    const size_t index = std::stoul(name.substr(2, dot - 2));
    at::Tensor* slot =
        index < micro_batches.size() ? field(micro_batches[index], name.substr(dot + 1)) : nullptr;
    if (slot == nullptr)
      throw CheckpointError("[forensics] unexpected tensor " + name + " in batch.safetensors");
    *slot = tensor;
  }
  for (Batch& b : micro_batches) b = b.to(device);

  Transformer model(config.model);
  load_model_weights(bundle, *model);
  model->to(device);
  model->train();
  const std::string fault_spec = state.at("fault").get<std::string>();
  const FaultInjection fault = fault_spec.empty() ? FaultInjection{} : FaultInjection::parse(fault_spec);
  restore_global_rng(state.at("rng"), device);  // last: dropout must draw what the original step drew
  result.outcome = compute_step(model, micro_batches, config.train, /*log_row=*/true, /*diagnose=*/true,
                                fault, result.step);
  return result;
}

}  // namespace causal
