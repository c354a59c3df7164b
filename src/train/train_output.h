// Where the training loop's records go: metrics rows and log lines (the run folder in a real run).
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace spdlog {
class logger;
}

namespace causal {

class TrainOutput {
 public:
  virtual ~TrainOutput() = default;
  virtual void append_metrics(const nlohmann::json& row) = 0;  // one metrics.jsonl row
  virtual spdlog::logger& log() = 0;
};

}  // namespace causal
