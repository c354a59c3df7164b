// Where a data-parallel rank other than 0 sends its records: metrics are dropped (rank 0 writes the run
// folder alone) and warnings and errors go to stderr, which the launcher prefixes with the rank. It saves,
// evaluates and reports nothing.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "run/rank_output.h"

namespace causal {

class WorkerOutput : public RankOutput {
 public:
  explicit WorkerOutput(int64_t rank);
  void append_metrics(const nlohmann::json&) override {}
  spdlog::logger& log() override { return *logger_; }
  spdlog::logger& run_log() override { return *dropped_; }
  std::string run_dir() const override { return ""; }
  const MatmulPeak& peak() const override { return peak_; }
  std::unique_ptr<RankLoop> loop(Transformer model, const torch::optim::Optimizer& optimizer,
                                 const std::optional<CheckpointInfo>& from, const FaultInjection& fault,
                                 const ThreadSplit& threads,
                                 const std::optional<BaseCheckpoint>& base) override;
  void check_writes(int64_t, const std::string&) const override {}
  TrainOutcome complete(TrainOutcome, Transformer&, double, const TrainSummary&,
                        const RankContext&) override {
    return TrainOutcome{};
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::logger> dropped_;  // no sinks: the run's lines are the leader's
  MatmulPeak peak_;                          // never measured: MFU is the leader's figure
};

}  // namespace causal
