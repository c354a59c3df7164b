// The training loop: lr -> forward/backward (accumulated) -> health check -> clip -> step -> metrics -> eval.
#pragma once

#include <c10/core/Device.h>
#include <torch/optim/adamw.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "config/config.h"
#include "data/batch_source.h"
#include "model/transformer.h"
#include "train/run_folder.h"

namespace causal {

// What one optimizer step's forward/backward passes produced (gradients are left in the parameters).
struct StepGradients {
  double loss = 0.0;            // mean loss over the step's valid tokens
  int64_t valid_tokens = 0;     // label positions in the loss, over all micro-batches
  int64_t input_tokens = 0;     // positions fed to the model, padding included
  double max_abs_logit = 0.0;   // of the last micro-batch (diagnostics only)
  std::vector<double> act_rms;  // RMS of the residual stream after each block, last micro-batch
};

// Zeroes the gradients, then accumulates them over `micro_batches` (already on the model's device) with
// one denominator: the valid-token count of the whole step, never a mean of per-micro-batch means.
StepGradients accumulate_gradients(Transformer& model, const std::vector<Batch>& micro_batches,
                                   bool collect_diagnostics);

// Global L2 norm of all gradients, before any clipping; then scales them to at most `max_norm`
// (max_norm <= 0: no clipping). Returns the pre-clip norm.
double clip_gradients(torch::nn::Module& model, double max_norm);

// Where the loop stands; a resumed run starts from the checkpoint's values.
struct TrainProgress {
  int64_t step = 0;           // optimizer steps completed (skipped ones included)
  int64_t tokens_seen = 0;    // input positions fed to the model, padding included
  int64_t skipped_steps = 0;  // updates skipped for non-finite values (nonfinite = "skip")
};

struct TrainSummary {
  TrainProgress progress;     // at the end of the loop
  double final_loss = 0.0;    // training loss of the last step of this process (0 if it took none)
  double seconds = 0.0;       // wall time of this process's loop
  double tokens_per_s = 0.0;  // input positions per second over this process's loop
};

class Trainer {
 public:
  // Evaluation hook for eval_every: returns the figures to log as an "eval" metrics row.
  using EvalFn = std::function<nlohmann::json(Transformer& model, int64_t step)>;
  // Called after every step (checkpoints, stop requests); returning false ends the loop there.
  using AfterStepFn = std::function<bool(const TrainProgress& progress)>;

  Trainer(const RunConfig& config, Transformer model, BatchSource& source, RunFolder& folder,
          c10::Device device);
  torch::optim::AdamW& optimizer() { return *optimizer_; }
  // Trains from `start` up to config.train.steps, or until after_step returns false.
  TrainSummary run(const TrainProgress& start, const EvalFn& evaluate, const AfterStepFn& after_step);

 private:
  const RunConfig& config_;
  Transformer model_;
  BatchSource& source_;
  RunFolder& folder_;
  c10::Device device_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

}  // namespace causal
