// One training run from a resolved config: task -> model -> trainer -> evaluation -> results.json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/resume.h"
#include "config/config.h"

namespace causal {

struct TrainRequest {
  ResumeRequest start;       // the run folder and the checkpoint to continue from, if any
  bool print_table = true;   // print the results table on stdout at the end
  int64_t stop_at_step = 0;  // > 0: save a checkpoint after this step and stop as a preempted run would
  std::string inject_fault;  // FaultInjection::parse spec, "" = none (tests and drills)
};

struct TrainOutcome {
  std::string run_dir;            // the run folder used ("" on ranks other than the leader)
  std::string checkpoint;         // the newest checkpoint of the run
  int64_t stopped_at_step = 0;    // > 0: stop_at_step ended the run there (results is then empty)
  bool already_finished = false;  // the run was complete before this call: nothing was written
  nlohmann::json results = nlohmann::json::object();  // the contents of results.json
};

// Trains and evaluates. Errors: ConfigError/UsageError (device, flags), DataError, RunFolderError,
// CheckpointError, NonFiniteError, InterruptedRun (after its checkpoint was saved). Nothing is written
// before the data is opened and any checkpoint to resume from has been checked.
TrainOutcome train_run(const RunConfig& config, const TrainRequest& request);

}  // namespace causal
