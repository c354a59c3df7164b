// Where a data-parallel rank other than 0 sends its records: metrics are dropped (rank 0 writes the run
// folder alone) and warnings and errors go to stderr, which the launcher prefixes with the rank.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "train/train_output.h"

namespace causal {

class WorkerOutput : public TrainOutput {
 public:
  explicit WorkerOutput(int64_t rank);
  void append_metrics(const nlohmann::json&) override {}
  spdlog::logger& log() override { return *logger_; }

 private:
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace causal
