// Where each rank of a training job starts, before anything is written: the leader (rank 0, or the single
// process) plans the start (plan_start) and holds the folder it continues in; the other ranks follow the
// checkpoint the leader chose and have no folder.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "run/rank_context.h"
#include "run/rank_output.h"
#include "run/train_run.h"
#include "task/task.h"

namespace causal {

class RankStart {
 public:
  virtual ~RankStart() = default;
  // The checkpoint this rank would start from (nullopt: step 0). RankContext::share_start then gives every
  // rank the leader's. Called once.
  virtual std::optional<CheckpointInfo> checkpoint() = 0;
  // The file system of the folder the run will write must take a new file and the checkpoints the run
  // adds there of `checkpoint_bytes` each, plus its logs and metrics; else RunFolderError.
  virtual void check_writable(int64_t checkpoint_bytes) const = 0;
  // Where check_resumable warns about settings that changed: the log of the folder continued in, else
  // nowhere (nullptr).
  virtual spdlog::logger* resume_log() = 0;
  // The outcome when nothing is left to do from `from` (nothing is written), else nullopt.
  virtual std::optional<TrainOutcome> finished(const CheckpointInfo& from, const Task& task) = 0;
  // What this rank writes from here on. The leader's folder: created for a new run; for a continued one,
  // newer invalid checkpoints set aside and the metrics of steps to be repeated dropped; then config.json
  // and the task's files. Called once, after the checks above.
  virtual std::unique_ptr<RankOutput> prepare(const std::optional<CheckpointInfo>& from, Task& task) = 0;
};

// The one place where the leader and the other ranks part (RankContext::leader). The leader plans here,
// and opens the folder it continues or restarts in: locked before its checkpoints are read, since another
// process may be writing them. What it returns, and what its prepare returns, refer to these arguments
// and to prepare's `task`, which must outlive them.
std::unique_ptr<RankStart> start_rank(const RankContext& ranks, const RunConfig& config,
                                      const TrainRequest& request, const nlohmann::json& config_json,
                                      const c10::Device& device);

}  // namespace causal
