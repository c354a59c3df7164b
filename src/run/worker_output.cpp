// A stderr-only logger for ranks other than 0, and a loop side that saves nothing.
#include "run/worker_output.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

namespace causal {
namespace {

class WorkerLoop final : public RankLoop {
 public:
  void add_hooks(TrainHooks&) override {}
  bool after_step(const TrainProgress&, bool, const std::function<TrainingState()>&) override { return true; }
  std::string newest_checkpoint() const override { return ""; }
};

}  // namespace

WorkerOutput::WorkerOutput(int64_t rank)
    : logger_(std::make_shared<spdlog::logger>("rank " + std::to_string(rank),
                                               std::make_shared<spdlog::sinks::stderr_color_sink_mt>())),
      dropped_(std::make_shared<spdlog::logger>("run")) {
  logger_->set_level(spdlog::level::warn);
  logger_->set_pattern("%l: %v");
  dropped_->set_level(spdlog::level::off);
}

std::unique_ptr<RankLoop> WorkerOutput::loop(Transformer, const torch::optim::Optimizer&,
                                             const std::optional<CheckpointInfo>&, const FaultInjection&,
                                             const ThreadSplit&, const std::optional<BaseCheckpoint>&) {
  return std::make_unique<WorkerLoop>();
}

}  // namespace causal
