// Resume planning.
#include "checkpoint/resume.h"

#include <spdlog/logger.h>

#include <fstream>

#include "checkpoint/checkpoint_dir.h"
#include "core/errors.h"
#include "io/run_files.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

bool has_valid_checkpoint(const fs::path& run_dir) {
  return fs::is_directory(run_dir / run_files::kCheckpoints) &&
         latest_valid_checkpoint(run_dir / run_files::kCheckpoints);
}

// A folder killed between its creation and its config.json: nothing in it but what creation made.
bool holds_only_a_new_folder(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == run_files::kLock || name == run_files::kLog) continue;
    if (name == run_files::kMetrics && fs::file_size(entry.path(), ec) == 0) continue;
    return false;
  }
  return !ec;
}

// StartPlan::restart_in for "auto" without a checkpoint to continue: empty where the folder's creation
// decides (empty, absent, not a run folder, finished, holding a checkpoint, or runs/<name> holding another
// run: that one gets runs/<name>-N).
fs::path restart_folder(const ResumeRequest& request, const nlohmann::json& config) {
  const bool named = request.run_dir.empty();
  const fs::path dir =
      named ? fs::path(request.runs_root) / config.at("name").get<std::string>() : fs::path(request.run_dir);
  std::error_code ec;
  if (!fs::exists(dir, ec) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) return {};
  std::ifstream in(dir / run_files::kConfig);
  if (!in) return holds_only_a_new_folder(dir) ? dir : fs::path();
  const nlohmann::json stored = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!stored.is_object()) return {};
  const std::vector<std::string> differences =
      config_differences(stored, config, {"model", "data", "seed", "name"}, "its config.json");
  if (!differences.empty()) {
    if (named) return {};
    throw RunFolderError("run folder " + dir.string() + " holds another run (" +
                         first_differences(differences) +
                         "); choose another --run-dir (runs are never overwritten)");
  }
  const fs::path checkpoints = dir / run_files::kCheckpoints;
  // This run's checkpoints, none of them valid: nothing to continue from, and nothing to overwrite.
  if (!newest_checkpoint_problem(checkpoints).empty() && !latest_valid_checkpoint(checkpoints))
    find_checkpoint(dir, "");  // throws, naming why the newest one is invalid
  if (fs::exists(dir / run_files::kResults)) return {};
  for (const auto& entry : fs::directory_iterator(checkpoints, ec)) {
    if (entry.path().filename().string().rfind("step_", 0) == 0) return {};
  }
  return dir;
}

}  // namespace

StartPlan plan_start(const ResumeRequest& request, const nlohmann::json& config) {
  StartPlan plan;
  if (request.resume == "never") return plan;
  if (request.resume == "auto") {
    if (!request.run_dir.empty()) {
      if (has_valid_checkpoint(request.run_dir)) {
        plan.continue_in = request.run_dir;
      } else {
        plan.restart_in = restart_folder(request, config);
      }
      return plan;
    }
    const std::string name = config.at("name").get<std::string>();
    const int64_t steps = config.at("train").at("steps").get<int64_t>();
    // Without --run-dir, only an unfinished run of the same name is continued; a finished one is kept
    // and the new run gets a folder of its own.
    const fs::path named = fs::path(request.runs_root) / name;
    // A run killed after its last checkpoint but before results.json is unfinished too.
    if (has_valid_checkpoint(named) && (read_checkpoint(find_checkpoint(named, "")).state.step < steps ||
                                        !fs::exists(named / run_files::kResults))) {
      plan.continue_in = named;
    } else {
      plan.restart_in = restart_folder(request, config);
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
  remove_stale_temporaries(plan.continue_in / run_files::kCheckpoints);
  CheckpointInfo from = read_checkpoint(find_checkpoint(plan.continue_in, plan.checkpoint_ref));
  // Fixed-width step names sort by step, so no second read (and hash) of the newest checkpoint is needed.
  if (auto newest = latest_valid_checkpoint(plan.continue_in / run_files::kCheckpoints);
      newest && newest->filename().string() > checkpoint_name(from.state.step)) {
    throw CheckpointError("[checkpoint] " + plan.continue_in.string() + " has checkpoints newer than " +
                          from.dir.filename().string() +
                          "; continuing there would overwrite them. Pass --run-dir NEW to start a new run "
                          "folder from that checkpoint");
  }
  return from;
}

std::optional<nlohmann::json> finished_results(const StartPlan& plan, const CheckpointInfo& from,
                                               int64_t steps) {
  if (plan.continue_in.empty() || from.state.step != steps) return std::nullopt;
  std::ifstream in(plan.continue_in / run_files::kResults);
  if (!in) return std::nullopt;
  const nlohmann::json results = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (results.is_discarded()) return std::nullopt;
  return results;
}

void check_resumable(const CheckpointInfo& from, const nlohmann::json& requested_config,
                     const nlohmann::json& identity, spdlog::logger* log) {
  // An import without data takes any data its tokenizer encoded: only the tokenizer is compared.
  const bool awaiting = awaits_data(from.state);
  // An adapter run's first start on a full checkpoint is a new run over frozen weights: how its products
  // compute (model.autocast and its weight shadows) is its own to choose, as it is for eval; the weights
  // and their shapes are not.
  nlohmann::json stored = from.config, requested = requested_config;
  const bool adapters_start = !from.state.base && requested.contains("train") &&
                              requested["train"].contains("lora") &&
                              requested["train"]["lora"].value("rank", 0) > 0;
  if (adapters_start)
    for (nlohmann::json* config : {&stored, &requested})
      if (config->contains("model"))
        for (const char* key : {"autocast", "weight_shadows"}) (*config)["model"].erase(key);
  std::vector<std::string> errors =
      config_differences(stored, requested,
                         awaiting ? std::vector<std::string>{"model", "seed"}
                                  : std::vector<std::string>{"model", "data", "seed"});
  // An adapter checkpoint continues with the very adapters it holds (their shapes, scale and targets).
  if (from.state.base) {
    const auto lora_of = [](const nlohmann::json& config) {
      return config.contains("train") ? config["train"].value("lora", nlohmann::json()) : nlohmann::json();
    };
    const std::vector<std::string> lora =
        config_differences({{"lora", lora_of(from.config)}}, {{"lora", lora_of(requested_config)}}, {"lora"});
    for (const std::string& difference : lora) errors.push_back("train." + difference);
  }
  nlohmann::json now = identity;
  if (awaiting && now.is_object()) {
    nlohmann::json tokenizer_only;
    for (const char* key : {"tokenizer", "tokenizer_description"}) tokenizer_only[key] = now.value(key, "");
    tokenizer_only["awaiting_data"] = true;
    now = tokenizer_only;
  }
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
