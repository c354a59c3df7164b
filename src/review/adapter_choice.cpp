// --adapter SPEC -> the adapter checkpoint it names, checked against the --run's base (see adapter_choice.h).
#include "review/adapter_choice.h"

#include "core/errors.h"
#include "io/run_files.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

std::string absolute_text(const fs::path& dir) { return fs::absolute(dir).lexically_normal().string(); }

// The whole model the --run's weights rest on: its adapters' base, or the checkpoint itself.
void set_base(AdapterIdentity& identity, const CheckpointInfo& run) {
  if (run.state.base) {
    identity.base = absolute_text(run.state.base->dir);
    identity.base_sha256 = run.state.base->model_sha256;
  } else {
    identity.base = absolute_text(run.dir);
    identity.base_sha256 = weights_sha256(run);
  }
}

void set_adapters(AdapterChoice& choice, const CheckpointInfo& adapters, const std::string& label) {
  choice.identity.label = label;
  choice.identity.checkpoint = absolute_text(adapters.dir);
  choice.identity.step = adapters.state.step;
  choice.identity.sha256 = weights_sha256(adapters);
  choice.adapters = adapters;
}

// The adapter checkpoint a path names: a run folder's newest valid one, or the directory itself.
CheckpointInfo adapter_checkpoint(const std::string& spec, const std::string& command) {
  const std::string flag = command + ": --adapter " + spec;
  const fs::path path(spec);
  if (!fs::is_directory(path))
    throw UsageError(flag +
                     ": no such run folder or checkpoint directory (expected none, a LoRA run folder "
                     "or an adapter checkpoint directory)");
  if (fs::is_directory(path / run_files::kCheckpoints)) return read_checkpoint(find_checkpoint(path, ""));
  if (!fs::exists(path / "manifest.json"))
    throw UsageError(flag + ": neither a run folder (no " + run_files::kCheckpoints +
                     "/) nor a checkpoint directory (no manifest.json)");
  return read_checkpoint(path);
}

}  // namespace

std::string run_step_label(const fs::path& folder_or_checkpoint, int64_t step) {
  fs::path p = folder_or_checkpoint.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // a trailing separator
  if (p.parent_path().filename() == run_files::kCheckpoints) p = p.parent_path().parent_path();
  return (p.empty() ? std::string(".") : p.string()) + "@step" + std::to_string(step);
}

nlohmann::json AdapterIdentity::to_json() const {
  nlohmann::json json = {{"label", label}, {"base", base}, {"base_sha256", base_sha256}};
  if (none()) {
    json["checkpoint"] = nullptr;
  } else {
    json["checkpoint"] = checkpoint;
    json["step"] = step;
    json["sha256"] = sha256;
  }
  return json;
}

AdapterIdentity AdapterIdentity::from_json(const nlohmann::json& json) {
  AdapterIdentity identity;
  if (!json.is_object()) return identity;
  const auto text = [&](const char* key) {
    const auto it = json.find(key);
    return it != json.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  identity.label = text("label");
  identity.checkpoint = text("checkpoint");
  identity.sha256 = text("sha256");
  identity.base = text("base");
  identity.base_sha256 = text("base_sha256");
  const auto step = json.find("step");
  if (step != json.end() && step->is_number_integer()) identity.step = step->get<int64_t>();
  return identity;
}

std::string describe_adapter(const AdapterIdentity& identity) {
  if (identity.none() || identity.sha256.empty()) return identity.label;
  return identity.label + " (adapter " + identity.sha256.substr(0, kDigestShown) + ")";
}

AdapterChoice resolve_adapter(const std::string& spec, const CheckpointInfo& run, const std::string& run_dir,
                              const std::string& command) {
  AdapterChoice choice;
  set_base(choice.identity, run);
  if (spec.empty()) {
    if (run.state.base) set_adapters(choice, run, run_step_label(run.dir, run.state.step));
    return choice;
  }
  if (spec == "none") {
    // On a whole checkpoint the base alone is the checkpoint itself: accepted, and the default figures.
    choice.identity.label = kNoAdapterLabel;
    choice.run_own = !run.state.base.has_value();
    return choice;
  }
  const CheckpointInfo adapters = adapter_checkpoint(spec, command);
  const std::string flag = command + ": --adapter " + spec;
  if (!adapters.state.base) {
    throw UsageError(flag + ": " + adapters.dir.string() +
                     " is a whole checkpoint (model.safetensors), not LoRA adapters; --adapter takes a LoRA "
                     "run folder, an adapter checkpoint directory or none");
  }
  // The same base means the same weights: the digest decides, not the path (a base may be named two ways).
  const BaseCheckpoint& trained_on = *adapters.state.base;
  if (trained_on.model_sha256 != choice.identity.base_sha256) {
    throw UsageError(flag + ": its adapters were trained on base " + trained_on.dir.string() +
                     " (model.safetensors sha256 " + trained_on.model_sha256.substr(0, kDigestShown) +
                     "...), but the base of --run " + run_dir + " is " + choice.identity.base + " (sha256 " +
                     choice.identity.base_sha256.substr(0, kDigestShown) +
                     "...): adapters apply only to the base they were trained on");
  }
  set_adapters(choice, adapters, run_step_label(spec, adapters.state.step));
  choice.run_own = fs::equivalent(adapters.dir, run.dir);
  return choice;
}

}  // namespace causal
