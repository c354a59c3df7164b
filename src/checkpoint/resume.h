// Where a training run starts: a new run folder, a folder of this run restarted at step 0, or a checkpoint
// (continued in its own folder or forked into a new one); whether that checkpoint may continue under the
// requested config; and the results of a run that had already finished.
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
  // A folder holding this very run (config.json with the same model, data, seed and name) and no checkpoint
  // at all: it was killed before its first checkpoint (SIGKILL, preemption) and starts again there from
  // step 0, so a requeue loop converges. Empty otherwise.
  std::filesystem::path restart_in;
};

// `config` is the requested run's resolved config: an unfinished run of its name is continued by "auto".
// Reads checkpoints but writes nothing. Throws CheckpointError for a PATH that holds none or a folder of
// this run whose every checkpoint is invalid, and RunFolderError for a --run-dir that holds another run.
StartPlan plan_start(const ResumeRequest& request, const nlohmann::json& config);

// The checkpoint `plan` continues from, verified and parsed (nullopt for a fresh run). A run folder that
// holds checkpoints newer than the one named is refused: continuing there would overwrite them.
std::optional<CheckpointInfo> checkpoint_to_continue(const StartPlan& plan);

// A finished run's results: `from` is its last step (`steps`) and the folder continued in has a readable
// results.json. nullopt otherwise.
std::optional<nlohmann::json> finished_results(const StartPlan& plan, const CheckpointInfo& from,
                                               int64_t steps);

// The requested config must describe the same model, data and seed as the checkpoint's, and the data
// must still be what it was (`identity`, from the task); steps, intervals, threads may change and are
// logged as warnings. An adapter run's first start on a full checkpoint may also change model.autocast and
// model.weight_shadows. Throws CheckpointError listing every difference.
void check_resumable(const CheckpointInfo& from, const nlohmann::json& requested_config,
                     const nlohmann::json& identity, spdlog::logger* log);

}  // namespace causal
