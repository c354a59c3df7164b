// One training run from a resolved config: data -> model -> trainer -> evaluation -> results.json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"

namespace causal {

struct TrainRequest {
  std::string run_dir;             // explicit run folder; empty = runs_root/<name> (suffixed if taken)
  std::string runs_root = "runs";  // where named run folders go
  bool print_table = true;         // print the results table on stdout at the end
  // "auto": continue from the newest valid checkpoint of the run folder (run_dir, or runs_root/<name>
  // when that run is unfinished), else start fresh; "never": always a new run; anything else: a
  // checkpoint directory or run folder to continue from (in its own run folder, or in run_dir if given).
  std::string resume = "auto";
  int64_t stop_at_step = 0;  // > 0: save a checkpoint after this step and stop as a preempted run would
  std::string inject_fault;  // FaultInjection::parse spec, "" = none (tests and drills)
};

// Trains and evaluates; returns the contents of results.json, or {"stopped_at_step", "checkpoint",
// "run_dir"} when stop_at_step ended the run. Errors: ConfigError/std::invalid_argument (device, flags),
// DataError, RunFolderError, CheckpointError, NonFiniteError, InterruptedRun (after its checkpoint was
// saved). Nothing is written before the data is built and any checkpoint to resume from has been checked.
nlohmann::json train_run(const RunConfig& config, const TrainRequest& request);

}  // namespace causal
