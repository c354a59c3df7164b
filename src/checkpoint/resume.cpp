// Resume planning.
#include "checkpoint/resume.h"

#include <spdlog/logger.h>

#include "checkpoint/checkpoint_dir.h"
#include "core/errors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

bool has_valid_checkpoint(const fs::path& run_dir) {
  return fs::is_directory(run_dir / "checkpoints") && latest_valid_checkpoint(run_dir / "checkpoints");
}

}  // namespace

StartPlan plan_start(const ResumeRequest& request, const std::string& name, int64_t steps) {
  StartPlan plan;
  if (request.resume == "never") return plan;
  if (request.resume == "auto") {
    if (!request.run_dir.empty()) {
      if (has_valid_checkpoint(request.run_dir)) plan.continue_in = request.run_dir;
      return plan;
    }
    // Without --run-dir, only an unfinished run of the same name is continued; a finished one is kept
    // and the new run gets a folder of its own.
    const fs::path named = fs::path(request.runs_root) / name;
    // A run killed after its last checkpoint but before results.json is unfinished too.
    if (has_valid_checkpoint(named) && (read_checkpoint(find_checkpoint(named, "")).state.step < steps ||
                                        !fs::exists(named / "results.json"))) {
      plan.continue_in = named;
    }
    return plan;
  }
  const fs::path checkpoint = find_checkpoint(fs::path(), request.resume);
  const fs::path owner = checkpoint.parent_path().parent_path();
  if (request.run_dir.empty() || fs::weakly_canonical(request.run_dir) == fs::weakly_canonical(owner)) {
    plan.continue_in = owner;
    plan.checkpoint_ref = checkpoint.string();
  } else {
    plan.fork_from = checkpoint;
  }
  return plan;
}

std::optional<CheckpointInfo> checkpoint_to_continue(const StartPlan& plan) {
  if (plan.fork_from) return read_checkpoint(*plan.fork_from);
  if (plan.continue_in.empty()) return std::nullopt;
  remove_stale_temporaries(plan.continue_in / "checkpoints");
  CheckpointInfo from = read_checkpoint(find_checkpoint(plan.continue_in, plan.checkpoint_ref));
  // Fixed-width step names sort by step, so no second read (and hash) of the newest checkpoint is needed.
  if (auto newest = latest_valid_checkpoint(plan.continue_in / "checkpoints");
      newest && newest->filename().string() > checkpoint_name(from.state.step)) {
    throw CheckpointError("[checkpoint] " + plan.continue_in.string() + " has checkpoints newer than " +
                          from.dir.filename().string() +
                          "; continuing there would overwrite them. Pass --run-dir NEW to start a new run "
                          "folder from that checkpoint");
  }
  return from;
}

void check_resumable(const CheckpointInfo& from, const nlohmann::json& requested_config,
                     const nlohmann::json& identity, spdlog::logger* log) {
  std::vector<std::string> errors =
      config_differences(from.config, requested_config, {"model", "data", "seed"});
  nlohmann::json now = identity;
  // Checkpoints written before the data fingerprint existed are compared on what they hold.
  if (from.state.data_identity.is_object() && now.is_object() &&
      !from.state.data_identity.contains("train_sha256"))
    now.erase("train_sha256");
  if (from.state.data_identity != now) {
    const nlohmann::json& was = from.state.data_identity;
    if (was.is_object() && now.is_object()) {
      // Each field that changed, by name (the data fingerprint, the tokenizer, the counts).
      nlohmann::json keys = was;
      keys.update(now);
      for (const auto& [key, _] : keys.items()) {
        const nlohmann::json a = was.value(key, nlohmann::json("(absent)")),
                             b = now.value(key, nlohmann::json("(absent)"));
        if (a != b)
          errors.push_back("training data " + key + ": checkpoint " + a.dump() + ", now " + b.dump());
      }
    } else {
      errors.push_back("training data: checkpoint " + was.dump() + ", now " + now.dump());
    }
  }
  if (!errors.empty()) {
    std::string message = "[checkpoint] " + from.dir.string() + " cannot continue with this config: ";
    for (size_t i = 0; i < errors.size(); ++i) message += (i ? "; " : "") + errors[i];
    throw CheckpointError(message);
  }
  if (log) {
    for (const std::string& change :
         config_differences(from.config, requested_config, {"name", "device", "threads", "train"}))
      log->warn("config changed since the checkpoint: {}", change);
  }
}

}  // namespace causal
