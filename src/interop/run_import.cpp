// Import's run folder: the imported weights in a fresh Transformer, saved as a step-0 training checkpoint.
#include "interop/run_import.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/checkpoint.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "interop/vocab.h"
#include "model/transformer.h"
#include "run/run_folder.h"
#include "task/task.h"
#include "train/optimizer.h"
#include "train/spike_detector.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

nlohmann::json base_config(const ImportRequest& request, const ModelConfig& model) {
  // Rows no longer than the model's context (a GGUF or HF model may have less than the default 256).
  if (request.config.empty())
    // The run is named after its folder ("runs/x/" too: a trailing slash names no file).
    return {{"name", fs::path(request.out + "/").lexically_normal().parent_path().filename().string()},
            {"data", {{"kind", "text"}, {"seq_len", std::min<int64_t>(256, model.max_seq_len)}}}};
  std::ifstream in(request.config);
  if (!in) throw ConfigError(request.config, "", "cannot open the config file");
  const nlohmann::json base = nlohmann::json::parse(in, nullptr, false, /*ignore_comments=*/true);
  if (!base.is_object()) throw ConfigError(request.config, "", "not a JSON object");
  return base;
}

// The imported tensors copied into `model`'s parameters; every parameter needs one of the same shape, and
// every tensor must find its parameter.
void copy_weights(const InteropModel& imported, Transformer& model, const std::string& input) {
  torch::NoGradGuard no_grad;
  size_t used = 0;
  for (auto& item : model->named_parameters()) {
    const auto it = imported.tensors.find(item.key());
    if (it == imported.tensors.end())
      throw CheckpointError("[import] " + input + ": no weight for parameter " + item.key());
    if (it->second.sizes() != item.value().sizes())
      throw CheckpointError("[import] " + input + ": " + item.key() + " has shape " +
                            c10::str(it->second.sizes()) + ", the model expects " +
                            c10::str(item.value().sizes()));
    item.value().copy_(it->second);
    ++used;
  }
  if (used != imported.tensors.size())
    throw CheckpointError("[import] " + input + ": " + std::to_string(imported.tensors.size() - used) +
                          " imported tensor(s) match no parameter of the model");
}

void round_weights(Transformer& model, const std::string& dtype) {
  if (dtype == "f32") return;
  if (dtype != "bf16" && dtype != "f16")
    throw UsageError("import: --dtype " + dtype + ": expected f32, bf16 or f16");
  const torch::ScalarType type = dtype == "bf16" ? torch::kBFloat16 : torch::kHalf;
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.copy_(p.to(type).to(torch::kFloat32));
}

void check_vocab(const InteropModel& imported, const Task& task, const std::string& input) {
  const std::map<std::string, std::string> files = task.run_files();
  const auto info_file = files.find(kTokenizerInfoFile);
  if (info_file == files.end() || imported.vocab_pieces.empty()) return;
  const TokenizerInfo info = tokenizer_info_from_json(nlohmann::json::parse(info_file->second), "data.train");
  if (info.name == kImportedTokenizer) return;  // ids from another trainer: nothing to compare
  const auto model_file = files.find(kTokenizerModelFile);
  const Vocab data = vocab_of(info, model_file == files.end() ? std::string() : model_file->second);
  if (data.pieces.size() != imported.vocab_pieces.size())
    throw DataError("[import] " + input + " lists " + std::to_string(imported.vocab_pieces.size()) +
                    " tokens, data.train's tokenizer " + std::to_string(data.pieces.size()));
  for (size_t i = 0; i < data.pieces.size(); ++i) {
    if (data.pieces[i] != imported.vocab_pieces[i])
      throw DataError("[import] " + input + ": token " + std::to_string(i) + " is \"" +
                      imported.vocab_pieces[i] + "\", data.train's tokenizer (" + info.describe() +
                      ") has \"" + data.pieces[i] + "\": encode the data with the model's own tokenizer");
  }
}

}  // namespace

std::string import_run(const InteropModel& imported, const std::string& input, const ImportRequest& request) {
  nlohmann::json base = base_config(request, imported.model);
  RunConfig with_model;
  with_model.model = imported.model;
  base["model"] = config_to_json(with_model).at("model");
  const std::string source = request.config.empty() ? input : request.config;
  const RunConfig config = parse_config_text(base.dump(), source, request.overrides);
  if (config.data.kind != DataKind::kText)
    throw UsageError("import: an imported model is a text model: data.kind must be \"text\"");
  const bool with_data = !config.data.train.empty() || !config.data.val.empty();
  if (with_data && (config.data.train.empty() || config.data.val.empty()))
    throw UsageError("import: name both data.train and data.val, or neither (import without data)");
  if (!with_data && !imported.tokenizer)
    throw UsageError("import: " + input +
                     " carries no tokenizer causal can rebuild, so the run needs its text data now: "
                     "--set data.train=TRAIN.tok --set data.val=VAL.tok");
  const nlohmann::json config_json = config_to_json(config);
  if (config_json.at("model") !=
      config_to_json(parse_config_text(base.dump(), source, {}, ConfigScope::kModel)).at("model"))
    throw UsageError("import: --set may not change model fields: the imported weights fix them");

  const c10::Device cpu(c10::kCPU);
  std::unique_ptr<Task> task = with_data ? make_task(config, cpu, TaskScope::kTraining) : nullptr;
  if (task) check_vocab(imported, *task, input);
  std::map<std::string, std::string> run_files;
  if (task) {
    run_files = task->run_files();
  } else {
    run_files[kTokenizerInfoFile] = tokenizer_info_to_json(imported.tokenizer->info).dump(2) + "\n";
    if (!imported.tokenizer->model_bytes.empty())
      run_files[kTokenizerModelFile] = imported.tokenizer->model_bytes;
  }
  std::unique_ptr<RunFolder> folder = RunFolder::create(request.out, "runs", config.name);
  folder->write_json("config.json", config_json);
  for (const auto& [name, bytes] : run_files) folder->write_file(name, bytes);

  torch::manual_seed(static_cast<uint64_t>(config.seed));
  Transformer model(config.model);
  copy_weights(imported, model, input);
  round_weights(model, request.dtype);
  const std::unique_ptr<torch::optim::AdamW> optimizer = make_adamw(*model, config.train.optimizer);

  TrainingState state;
  if (task) {
    state.initial_loss = task->initial_loss(model);
    state.data = task->training_batches().state();
    state.data_identity = task->identity();
  } else {
    const TokenizerInfo& info = imported.tokenizer->info;
    state.data_identity = identity_without_data(info.name, info.describe());
  }
  state.spike_detector = SpikeDetector(config.train.spike_window, config.train.spike_threshold).state();
  state.rng = capture_global_rng(cpu);
  const fs::path dir =
      save_checkpoint(folder->path() / "checkpoints", state, *model, *optimizer, config_json, run_files);
  if (task)
    folder->log().info("imported {} into {}: step-0 checkpoint {} (initial loss {:.6f})", input,
                       folder->path().string(), dir.string(), state.initial_loss);
  else
    folder->log().info("imported {} into {} without data: step-0 checkpoint {}, tokenizer {}", input,
                       folder->path().string(), dir.string(), imported.tokenizer->info.describe());
  return dir.string();
}

}  // namespace causal
