// Saving on schedule.
#include "checkpoint/checkpointer.h"

#include <spdlog/logger.h>
#include <torch/autograd.h>

#include "checkpoint/checkpoint_dir.h"
#include "core/scoped_timer.h"

namespace causal {
namespace {

bool all_finite(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.parameters()) {
    if (!p.isfinite().all().item<bool>()) return false;
  }
  return true;
}

}  // namespace

Checkpointer::Checkpointer(std::filesystem::path root, CheckpointerOptions options, torch::nn::Module& model,
                           const torch::optim::Optimizer& optimizer, nlohmann::json config,
                           spdlog::logger& log, std::filesystem::path last)
    : root_(std::move(root)),
      options_(options),
      model_(model),
      optimizer_(optimizer),
      config_(std::move(config)),
      log_(log),
      last_(std::move(last)) {}

bool Checkpointer::save(int64_t step, bool last_step, const std::function<TrainingState()>& state,
                        bool force) {
  const bool periodic = options_.every > 0 && step % options_.every == 0;
  if (!periodic && !last_step && !force) return false;
  if (!all_finite(model_)) {
    log_.error("step {}: the model holds non-finite values; no checkpoint written", step);
    return false;
  }
  double seconds = 0.0;
  {
    ScopedTimer timer(seconds);
    const TrainingState saved = state();
    last_ = save_checkpoint(root_, saved, model_, optimizer_, config_, extra_files_,
                            [&](const std::filesystem::path& dir) {
                              if (options_.during_write) options_.during_write(dir, step);
                            });
    // An adapter run's base may be a checkpoint of this very folder: it must outlive every pruning.
    prune_checkpoints(root_, options_.keep, saved.base ? saved.base->dir : std::filesystem::path());
  }
  log_.debug("checkpoint {} written in {:.3f}s", last_.string(), seconds);
  return true;
}

}  // namespace causal
