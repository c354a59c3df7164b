// Checkpoint contents: tensors in safetensors files, the rest in JSON; the directory mechanics
// (temporary, fsync, manifest, LATEST) are checkpoint_dir's.
#include "checkpoint/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/optim/adamw.h>

#include <cctype>
#include <fstream>
#include <map>
#include <set>

#include "checkpoint/checkpoint_dir.h"
#include "core/errors.h"
#include "core/optim_compat.h"
#include "core/rng_state.h"
#include "core/shape_text.h"
#include "io/atomic_file.h"
#include "io/run_files.h"
#include "io/safetensors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kAdapterFile = "adapter.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kConfigFile = "config.json";
constexpr int kStateFormat = 1;

nlohmann::json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw CheckpointError("[checkpoint] cannot read " + path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("[checkpoint] " + path.string() + " is not valid JSON: " + e.what());
  }
}

std::map<std::string, at::Tensor> by_name(NamedTensors tensors) {
  std::map<std::string, at::Tensor> map;
  for (auto& [name, tensor] : tensors) map.emplace(name, std::move(tensor));
  return map;
}

void flatten(const nlohmann::json& value, const std::string& path,
             std::map<std::string, nlohmann::json>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, child] : value.items()) flatten(child, path.empty() ? key : path + "." + key, out);
  } else {
    out[path] = value;
  }
}

}  // namespace

nlohmann::json identity_without_data(const std::string& tokenizer, const std::string& description) {
  return {{"tokenizer", tokenizer}, {"tokenizer_description", description}, {"awaiting_data", true}};
}

bool awaits_data(const TrainingState& state) {
  return state.data_identity.is_object() && state.data_identity.value("awaiting_data", false);
}

nlohmann::json thread_split_to_json(const ThreadSplit& split) {
  return {{"aten", split.aten}, {"blas", split.blas}};
}

ThreadSplit thread_split_from_json(const nlohmann::json& json, const std::string& source) {
  const ThreadSplit split{json.at("aten").get<int64_t>(), json.at("blas").get<int64_t>()};
  if (split.aten < 1 || split.blas < 1) {
    throw CheckpointError("[checkpoint] " + source + ": threads " + json.dump() + " must both be >= 1");
  }
  return split;
}

nlohmann::json BaseCheckpoint::to_json() const {
  return {{"checkpoint", dir.string()}, {"model_sha256", model_sha256}};
}

BaseCheckpoint BaseCheckpoint::from_json(const nlohmann::json& json, const std::string& source) {
  try {
    return {fs::path(json.at("checkpoint").get<std::string>()), json.at("model_sha256").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("[checkpoint] " + source + ": bad base: " + e.what());
  }
}

BaseCheckpoint base_of(const fs::path& from_dir, const std::optional<BaseCheckpoint>& from_base) {
  if (from_base) return *from_base;
  const nlohmann::json manifest = verify_checkpoint(from_dir);
  const nlohmann::json& files = manifest.at("files");
  if (!files.contains(kModelFile))
    throw CheckpointError("[checkpoint] " + from_dir.string() + " has no " + kModelFile + " to be a base");
  return {fs::absolute(from_dir).lexically_normal(), files.at(kModelFile).at("sha256").get<std::string>()};
}

nlohmann::json TrainingState::to_json() const {
  nlohmann::json json = {{"format", kStateFormat},
                         {"step", step},
                         {"tokens_seen", tokens_seen},
                         {"skipped_steps", skipped_steps},
                         {"initial_loss", initial_loss},
                         {"data", data},
                         {"data_identity", data_identity},
                         {"rng", rng},
                         {"consecutive_skips", consecutive_skips},
                         {"spike_detector", spike_detector},
                         {"world_size", world_size}};
  if (threads) json["threads"] = thread_split_to_json(*threads);
  if (optimizer_kernel) json["optimizer_kernel"] = *optimizer_kernel;
  if (base) json["base"] = base->to_json();
  return json;
}

TrainingState TrainingState::from_json(const nlohmann::json& json, const std::string& source) {
  TrainingState s;
  try {
    if (json.at("format").get<int>() != kStateFormat) {
      throw CheckpointError("[checkpoint] " + source + ": state format " + json.at("format").dump() +
                            " is not the supported " + std::to_string(kStateFormat));
    }
    s.step = json.at("step").get<int64_t>();
    s.tokens_seen = json.at("tokens_seen").get<int64_t>();
    s.skipped_steps = json.at("skipped_steps").get<int64_t>();
    s.initial_loss = json.at("initial_loss").get<double>();
    s.data = json.at("data");
    s.data_identity = json.at("data_identity");
    s.rng = json.at("rng");
    s.consecutive_skips = json.at("consecutive_skips").get<int64_t>();
    s.spike_detector = json.at("spike_detector");
    s.world_size = json.value("world_size", int64_t{1});
    if (json.contains("threads")) {
      s.threads = thread_split_from_json(json.at("threads"), source);
    }
    if (json.contains("base")) s.base = BaseCheckpoint::from_json(json.at("base"), source);
    if (json.contains("optimizer_kernel")) {
      s.optimizer_kernel = json.at("optimizer_kernel").get<std::string>();
      if (*s.optimizer_kernel != "fused" && *s.optimizer_kernel != "separate") {
        throw CheckpointError("[checkpoint] " + source + ": optimizer_kernel " +
                              json.at("optimizer_kernel").dump() + " is not \"fused\" or \"separate\"");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError("[checkpoint] " + source + ": missing or mistyped field: " + e.what());
  }
  return s;
}

nlohmann::json rng_json(const GeneratorSnapshot& snapshot) {
  nlohmann::json rng = {{"cpu", generator_state_hex(snapshot.cpu())}};
  if (snapshot.device()) {
    rng["device"] = {{"type", snapshot.device_kind().str()},
                     {"state", generator_state_hex(*snapshot.device())}};
  }
  return rng;
}

nlohmann::json capture_global_rng(const c10::Device& device) {
  return rng_json(GeneratorSnapshot::capture(device));
}

void restore_global_rng(const nlohmann::json& rng, const c10::Device& device) {
  try {
    if (!device.is_cpu()) {
      if (!rng.contains("device")) {
        throw CheckpointError("[checkpoint] the checkpoint holds no generator state for device " +
                              device.str());
      }
      restore_generator_state(at::globalContext().defaultGenerator(device),
                              rng.at("device").at("state").get<std::string>(), device.str() + " generator");
    }
    restore_generator_state(at::detail::getDefaultCPUGenerator(), rng.at("cpu").get<std::string>(),
                            "CPU generator");
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(std::string("[checkpoint] bad rng state: ") + e.what());
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw CheckpointError(std::string("[checkpoint] ") + e.what());
  }
}

void write_training_tensors(const fs::path& dir, torch::nn::Module& model,
                            const torch::optim::Optimizer& optimizer, int64_t step, bool adapter_only) {
  NamedTensors weights, moments;
  const auto& optimizer_state = optimizer.state();
  for (const auto& item : model.named_parameters()) {
    if (adapter_only && !item.value().requires_grad()) continue;  // the base's, kept in the base
    weights.emplace_back(item.key(), item.value().detach());
    auto found = optimizer_state.find(state_key(optimizer_state, item.value()));
    if (found == optimizer_state.end()) continue;  // never updated (no gradient yet)
    const auto& adam = static_cast<const torch::optim::AdamWParamState&>(*found->second);
    moments.emplace_back(item.key() + ".exp_avg", adam.exp_avg());
    moments.emplace_back(item.key() + ".exp_avg_sq", adam.exp_avg_sq());
    moments.emplace_back(item.key() + ".step", at::scalar_tensor(adam.step(), at::kLong));
  }
  const std::map<std::string, std::string> metadata = {{"format", "causal"}, {"step", std::to_string(step)}};
  save_safetensors((dir / (adapter_only ? kAdapterFile : kModelFile)).string(), weights, metadata);
  save_safetensors((dir / kOptimizerFile).string(), moments, metadata);
}

fs::path save_checkpoint(const fs::path& root, const TrainingState& state, torch::nn::Module& model,
                         const torch::optim::Optimizer& optimizer, const nlohmann::json& config,
                         const std::map<std::string, std::string>& extra_files,
                         const std::function<void(const fs::path&)>& after_tensors) {
  fs::create_directories(root);
  return commit_checkpoint(root, state.step, [&](const fs::path& dir) {
    write_training_tensors(dir, model, optimizer, state.step, state.base.has_value());
    if (after_tensors) after_tensors(dir);
    write_file_synced(dir / kStateFile, state.to_json().dump(2) + "\n");
    write_file_synced(dir / kConfigFile, config.dump(2) + "\n");
    for (const auto& [name, bytes] : extra_files) write_file_synced(dir / name, bytes);
  });
}

CheckpointInfo read_checkpoint(const fs::path& dir) {
  const nlohmann::json manifest = verify_checkpoint(dir);
  CheckpointInfo info;
  info.dir = dir;
  info.files = manifest.at("files");
  info.config = read_json_file(dir / kConfigFile);
  info.state = TrainingState::from_json(read_json_file(dir / kStateFile), (dir / kStateFile).string());
  return info;
}

std::string weights_sha256(const CheckpointInfo& checkpoint) {
  const nlohmann::json entry =
      checkpoint.files.value(checkpoint.state.base ? kAdapterFile : kModelFile, nlohmann::json());
  return entry.is_object() ? entry.value("sha256", "") : "";
}

fs::path find_checkpoint(const fs::path& run_dir, const std::string& ref) {
  const fs::path root = run_dir / run_files::kCheckpoints;
  if (ref.empty()) {
    if (auto latest = latest_valid_checkpoint(root)) return *latest;
    std::string why;
    std::ifstream latest_file(root / "LATEST");
    if (std::string name; latest_file >> name) {
      try {
        verify_checkpoint(root / name);
      } catch (const CheckpointError& e) {
        why = std::string(" (") + e.what() + ")";
      }
    }
    if (why.empty()) {
      if (const std::string problem = newest_checkpoint_problem(root); !problem.empty())
        why = " (" + problem + ")";
    }
    throw CheckpointError("[checkpoint] no valid checkpoint in " + root.string() + why);
  }
  if (std::all_of(ref.begin(), ref.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // More digits than any step count has would overflow the parse: no such checkpoint either way.
    if (ref.size() > 12) throw CheckpointError("[checkpoint] no checkpoint for step " + ref);
    const fs::path dir = root / checkpoint_name(std::stoll(ref));
    if (!fs::is_directory(dir))
      throw CheckpointError("[checkpoint] no checkpoint for step " + ref + " (" + dir.string() + ")");
    return dir;
  }
  const fs::path path(ref);
  if (fs::is_directory(path / run_files::kCheckpoints))
    return find_checkpoint(path, "");  // a run folder: its newest
  if (!fs::is_directory(path))
    throw CheckpointError("[checkpoint] " + ref + " is not a checkpoint directory");
  return path;
}

namespace {

// Copies the tensors of `files` (each name in one file only) into `model`'s parameters of those names;
// `files` together must hold every parameter and nothing else.
// With `frozen_only`, the parameters that require no gradient: an adapter run's base, its adapters fresh.
void load_parameters(const std::vector<std::string>& files, torch::nn::Module& model, bool frozen_only,
                     const TensorRead& after_read) {
  // The headers first: every check passes before a byte of data is read, and the data then goes straight
  // into the parameters (a second copy of a large base would double the load's peak memory).
  std::map<std::string, SafetensorsTensorInfo> stored;
  std::map<std::string, std::string> file_of;
  for (const std::string& file : files) {
    for (SafetensorsTensorInfo& info : safetensors_tensors(file)) {
      if (!file_of.emplace(info.name, file).second)
        throw CheckpointError("[checkpoint] " + file + ": tensor " + info.name + " is in " +
                              file_of[info.name] + " too");
      stored.emplace(info.name, std::move(info));
    }
  }
  const std::string file =
      files.size() == 1 ? files.front() : files.back() + " with its base " + files.front();
  torch::OrderedDict<std::string, at::Tensor> parameters;
  for (const auto& item : model.named_parameters())
    if (!frozen_only || !item.value().requires_grad()) parameters.insert(item.key(), item.value());
  // Everything is checked before the first copy, so a refused checkpoint leaves the model untouched.
  for (const auto& item : parameters) {
    auto found = stored.find(item.key());
    if (found == stored.end()) throw CheckpointError("[checkpoint] " + file + ": no tensor " + item.key());
    const at::Tensor& p = item.value();
    if (found->second.shape != p.sizes().vec() || found->second.dtype != p.scalar_type()) {
      throw CheckpointError("[checkpoint] " + file + ": " + item.key() + " is " +
                            shape_text(found->second.shape) + " " + c10::toString(found->second.dtype) +
                            ", the model needs " + shape_text(p.sizes().vec()) + " " +
                            c10::toString(p.scalar_type()));
    }
  }
  for (const auto& [name, info] : stored) {
    if (!parameters.contains(name))
      throw CheckpointError("[checkpoint] " + file + ": tensor " + name +
                            " belongs to no parameter of this model");
  }
  torch::NoGradGuard no_grad;
  for (const std::string& f : files) {
    std::map<std::string, at::Tensor> targets;
    for (const auto& [name, from] : file_of)
      if (from == f) targets.emplace(name, parameters[name]);
    read_safetensors_into(f, targets, after_read);
  }
}

}  // namespace

void load_model_weights(const fs::path& dir, torch::nn::Module& model, const TensorRead& after_read) {
  load_parameters({(dir / kModelFile).string()}, model, /*frozen_only=*/false, after_read);
}

void load_frozen_weights(const fs::path& dir, torch::nn::Module& model, const TensorRead& after_read) {
  load_parameters({(dir / kModelFile).string()}, model, /*frozen_only=*/true, after_read);
}

CheckpointInfo read_base_checkpoint(const CheckpointInfo& checkpoint) {
  if (!checkpoint.state.base)
    throw CheckpointError("[checkpoint] " + checkpoint.dir.string() +
                          " holds a whole model, no adapters on a base");
  const BaseCheckpoint& base = *checkpoint.state.base;
  const std::string where = "[checkpoint] " + checkpoint.dir.string() + ": its base " + base.dir.string();
  if (!fs::is_directory(base.dir))
    throw CheckpointError(where + " is gone (an adapter checkpoint holds no base weights of its own)");
  CheckpointInfo now;
  try {
    now = read_checkpoint(base.dir);
  } catch (const CheckpointError& e) {
    throw CheckpointError(where + " does not verify: " + e.what());
  }
  if (now.state.base || weights_sha256(now).empty())
    throw CheckpointError(where + " does not verify: it has no " + std::string(kModelFile) + " to be a base");
  if (weights_sha256(now) != base.model_sha256)
    throw CheckpointError(where + " has changed since the adapters were trained on it: its " +
                          std::string(kModelFile) + " is not the one of sha256 " + base.model_sha256);
  return now;
}

void load_model_weights(const CheckpointInfo& checkpoint, torch::nn::Module& model,
                        const TensorRead& after_read) {
  if (!checkpoint.state.base) return load_model_weights(checkpoint.dir, model, after_read);
  const CheckpointInfo base = read_base_checkpoint(checkpoint);
  load_parameters({(base.dir / kModelFile).string(), (checkpoint.dir / kAdapterFile).string()}, model,
                  /*frozen_only=*/false, after_read);
}

void load_optimizer_state(const fs::path& dir, torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  const std::string file = (dir / kOptimizerFile).string();
  std::map<std::string, at::Tensor> stored = by_name(load_safetensors(file));
  auto& optimizer_state = optimizer.state();
  auto take = [&](const std::string& name, const at::Tensor& like) {
    auto found = stored.find(name);
    if (found == stored.end()) throw CheckpointError("[checkpoint] " + file + ": no tensor " + name);
    at::Tensor t = found->second;
    stored.erase(found);
    if (like.defined() && (t.sizes() != like.sizes() || t.scalar_type() != like.scalar_type())) {
      throw CheckpointError("[checkpoint] " + file + ": " + name + " is " + shape_text(t.sizes().vec()) +
                            ", the parameter is " + shape_text(like.sizes().vec()));
    }
    return like.defined() ? t.to(like.device()) : t;
  };
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    if (!stored.count(name + ".step")) continue;  // never updated when saved
    auto adam = std::make_unique<torch::optim::AdamWParamState>();
    adam->step(take(name + ".step", at::Tensor()).item<int64_t>());
    adam->exp_avg(take(name + ".exp_avg", item.value()));
    adam->exp_avg_sq(take(name + ".exp_avg_sq", item.value()));
    optimizer_state[state_key(optimizer_state, item.value())] = std::move(adam);
  }
  if (!stored.empty()) {
    throw CheckpointError("[checkpoint] " + file + ": tensor " + stored.begin()->first +
                          " belongs to no parameter of this model");
  }
}

std::vector<std::string> config_differences(const nlohmann::json& stored, const nlohmann::json& requested,
                                            const std::vector<std::string>& keys,
                                            const std::string& stored_name) {
  std::vector<std::string> differences;
  for (const std::string& key : keys) {
    std::map<std::string, nlohmann::json> a, b;
    flatten(stored.value(key, nlohmann::json()), key, a);
    flatten(requested.value(key, nlohmann::json()), key, b);
    std::set<std::string> paths;
    for (const auto& [path, _] : a) paths.insert(path);
    for (const auto& [path, _] : b) paths.insert(path);
    for (const std::string& path : paths) {
      const nlohmann::json x = a.count(path) ? a[path] : nlohmann::json("(absent)");
      const nlohmann::json y = b.count(path) ? b[path] : nlohmann::json("(absent)");
      if (x != y)
        differences.push_back(path + ": " + stored_name + " " + x.dump() + ", requested " + y.dump());
    }
  }
  return differences;
}

std::string first_differences(const std::vector<std::string>& differences) {
  if (differences.empty()) return "";
  const size_t more = differences.size() - 1;
  return differences.front() + (more > 0 ? ", and " + std::to_string(more) + " more" : "");
}

}  // namespace causal
