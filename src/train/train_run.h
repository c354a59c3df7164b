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
};

// Trains and evaluates; returns the contents of results.json. Errors: ConfigError/std::invalid_argument
// (device), DataError, RunFolderError, NonFiniteError. Nothing is written before the data is built.
nlohmann::json train_run(const RunConfig& config, const TrainRequest& request);

}  // namespace causal
