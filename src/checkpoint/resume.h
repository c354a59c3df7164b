// Where a training run starts: a new run folder, or a checkpoint (continued in its own folder or forked
// into a new one), and whether that checkpoint may continue under the requested config.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"

namespace spdlog {
class logger;
}

namespace causal {

struct ResumeRequest {
  // "auto": continue from the newest valid checkpoint of the run folder (run_dir, or runs_root/<name>
  // when that run is unfinished), else start fresh; "never": always a new run; anything else: a
  // checkpoint directory or run folder to continue from (in its own run folder, or forked into run_dir).
  std::string resume = "auto";
  std::string run_dir;             // explicit run folder; empty = runs_root/<name>
  std::string runs_root = "runs";  // where named run folders go
};

struct StartPlan {
  std::filesystem::path continue_in;               // existing run folder to continue in; empty = create one
  std::string checkpoint_ref;                      // with continue_in: find_checkpoint's ref ("" = newest)
  std::optional<std::filesystem::path> fork_from;  // checkpoint to start a new folder from
};

// `name` and `steps` are the requested run's: an unfinished run of that name is continued by "auto".
// Reads checkpoints but writes nothing. Throws CheckpointError for a PATH that holds none.
StartPlan plan_start(const ResumeRequest& request, const std::string& name, int64_t steps);

// The checkpoint `plan` continues from, verified and parsed (nullopt for a fresh run). A run folder that
// holds checkpoints newer than the one named is refused: continuing there would overwrite them.
std::optional<CheckpointInfo> checkpoint_to_continue(const StartPlan& plan);

// The requested config must describe the same model, data and seed as the checkpoint's, and the data
// must still be what it was (`identity`, from the task); steps, intervals, threads may change and are
// logged as warnings. Throws CheckpointError listing every difference.
void check_resumable(const CheckpointInfo& from, const nlohmann::json& requested_config,
                     const nlohmann::json& identity, spdlog::logger* log);

}  // namespace causal
