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
#include "model/lora.h"
#include "model/transformer.h"
#include "run/run_folder.h"
#include "task/task.h"
#include "train/optimizer.h"
#include "train/spike_detector.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// The run is named after its folder ("runs/x/" too: a trailing slash names no file).
std::string folder_name(const std::string& out) {
  return fs::path(out + "/").lexically_normal().parent_path().filename().string();
}

nlohmann::json base_config(const ImportRequest& request, const ModelConfig& model) {
  // Rows no longer than the model's context (a GGUF or HF model may have less than the default 256).
  if (request.config.empty())
    return {{"name", folder_name(request.out)},
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

// A step-0 checkpoint's state: with a task, its data's position, identity and initial loss; without one,
// `identity` alone (a model imported without data). The generators are captured last.
TrainingState step_zero_state(Task* task, Transformer& model, const RunConfig& config,
                              const nlohmann::json& identity) {
  TrainingState state;
  if (task) {
    state.initial_loss = task->initial_loss(model);
    state.data = task->training_batches().state();
    state.data_identity = task->identity();
  } else {
    state.data_identity = identity;
  }
  state.spike_detector = SpikeDetector(config.train.spike_window, config.train.spike_threshold).state();
  state.rng = capture_global_rng(c10::Device(c10::kCPU));
  return state;
}

std::string tokenizer_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("[import] cannot read " + path.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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

  const TrainingState state = step_zero_state(
      task.get(), model, config,
      task ? nlohmann::json()
           : identity_without_data(imported.tokenizer->info.name, imported.tokenizer->info.describe()));
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

CheckpointInfo adapter_base_checkpoint(const std::string& run_dir) {
  if (run_dir.empty())
    throw UsageError("import: --format peft needs --base RUN, the run the adapter applies to");
  if (!fs::is_directory(run_dir))
    throw UsageError("import: --base " + run_dir +
                     ": no such run folder (the run whose checkpoint the adapter "
                     "was trained on: its export with --format hf is the model PEFT loaded)");
  CheckpointInfo base = read_checkpoint(find_checkpoint(run_dir, ""));
  if (base.state.base)
    throw UsageError(
        "import: --base " + run_dir + ": its newest checkpoint " + base.dir.string() +
        " holds LoRA adapters on " + base.state.base->dir.string() +
        ", not a whole model; name the run of a whole model (or export this one with --merge and "
        "import that with --format hf)");
  return base;
}

std::string import_adapter_run(const CheckpointInfo& base, const InteropAdapter& adapter,
                               const std::string& input, const ImportRequest& request) {
  if (!request.config.empty())
    throw UsageError("import: --config is for --format gguf|hf; an adapter takes its base's config (--base)");
  if (request.dtype != "f32")
    throw UsageError("import: --dtype " + request.dtype + " applies to whole models; adapters stay float32");
  const std::string source = input + "/adapter_config.json";
  nlohmann::json json = base.config;
  json["name"] = folder_name(request.out);
  RunConfig with_lora;
  with_lora.train.lora = adapter.lora;
  json["train"]["lora"] = config_to_json(with_lora).at("train").at("lora");
  const RunConfig config = parse_config_text(json.dump(), source, request.overrides);
  const nlohmann::json config_json = config_to_json(config);
  const nlohmann::json unchanged = config_to_json(parse_config_text(json.dump(), source));
  if (config_json.at("model") != unchanged.at("model") ||
      config_json.at("train").at("lora") != unchanged.at("train").at("lora"))
    throw UsageError(
        "import: --set may not change model.* or train.lora.*: the base and the adapter fix them");

  // As training on the base would: its data from the beginning, or, imported without data, any data its
  // tokenizer encoded (named now or when training).
  const bool awaiting = awaits_data(base.state);
  const bool with_data = !config.data.train.empty() || !config.data.val.empty();
  if (awaiting && with_data && (config.data.train.empty() || config.data.val.empty()))
    throw UsageError("import: name both data.train and data.val, or neither (import without data)");
  const c10::Device cpu(c10::kCPU);
  std::unique_ptr<Task> task =
      !awaiting || with_data ? make_task(config, cpu, TaskScope::kTraining) : nullptr;
  if (task && awaiting) {
    // Data named for a base imported without it: encoded by the base's own tokenizer, as training demands.
    const nlohmann::json now = task->identity(), was = base.state.data_identity;
    for (const char* key : {"tokenizer", "tokenizer_description"})
      if (now.value(key, nlohmann::json()) != was.value(key, nlohmann::json()))
        throw DataError("[import] data.train's tokenizer " + now.value(key, nlohmann::json()).dump() +
                        " is not the base's " + was.value(key, nlohmann::json()).dump() + " (" + key +
                        "): encode the data with the base's tokenizer");
  }
  std::map<std::string, std::string> run_files;
  if (task) {
    run_files = task->run_files();
  } else {
    for (const char* name : {kTokenizerInfoFile, kTokenizerModelFile})
      if (fs::exists(base.dir / name)) run_files[name] = tokenizer_file_bytes(base.dir / name);
  }

  torch::manual_seed(static_cast<uint64_t>(config.seed));
  Transformer model(config.model);
  load_model_weights(base.dir, *model);
  {
    // The base weights the file carries a copy of must be the base's: else it was trained beside another.
    const auto parameters = model->named_parameters();
    for (const auto& [parameter, copy] : adapter.base_copies) {
      const at::Tensor* mine = parameters.find(parameter);
      if (mine == nullptr || !torch::equal(mine->to(copy.second.scalar_type()), copy.second))
        throw ConfigError(input + "/adapter_model.safetensors", copy.first,
                          "differs from the base's " + parameter +
                              " (a layer resized or trained beside the adapter, which a LoRA import cannot "
                              "hold; or another base)");
    }
  }
  const std::vector<std::string> adapted = attach_lora(*model, config.train.lora);
  {
    torch::NoGradGuard no_grad;
    for (const auto& [path, lora] : lora_adapters(*model)) {
      const auto it = adapter.adapters.find(path);
      if (it == adapter.adapters.end() || it->second.a.sizes() != lora->a.sizes() ||
          it->second.b.sizes() != lora->b.sizes())
        throw ConfigError(
            source, "target_modules",
            "train.lora adapts " + path + ", which the adapter holds no (or other shaped) tensors for");
      lora->a.copy_(it->second.a);
      lora->b.copy_(it->second.b);
      if (lora->magnitude.defined() != it->second.magnitude.defined())
        throw ConfigError(source, "use_dora", path + ": a DoRA magnitude on one side only");
      if (lora->magnitude.defined()) lora->magnitude.copy_(it->second.magnitude);
    }
  }
  if (adapted.size() != adapter.adapters.size())
    throw ConfigError(source, "target_modules",
                      std::to_string(adapter.adapters.size()) +
                          " adapted products, train.lora.targets attaches " + std::to_string(adapted.size()));
  const std::unique_ptr<torch::optim::AdamW> optimizer = make_adamw(*model, config.train.optimizer);

  TrainingState state = step_zero_state(task.get(), model, config, base.state.data_identity);
  state.base = base_of(base.dir, std::nullopt);  // draws no random numbers: the generators stay as captured

  std::unique_ptr<RunFolder> folder = RunFolder::create(request.out, "runs", config.name);
  folder->write_json("config.json", config_json);
  for (const auto& [name, bytes] : run_files) folder->write_file(name, bytes);
  const fs::path dir =
      save_checkpoint(folder->path() / "checkpoints", state, *model, *optimizer, config_json, run_files);
  folder->log().info(
      "imported the LoRA adapter {} ({}r {} alpha {} on {} products, targets {}) into {} on the base "
      "{}: step-0 checkpoint {}",
      input, adapter.base_model_name.empty() ? "" : "trained on " + adapter.base_model_name + "; ",
      config.train.lora.rank, config.train.lora.alpha, adapted.size(),
      nlohmann::json(config.train.lora.targets).dump(), folder->path().string(), state.base->dir.string(),
      dir.string());
  return dir.string();
}

}  // namespace causal
