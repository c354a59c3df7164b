// The training loop: lr -> forward/backward (accumulated) -> health check -> clip -> step -> metrics -> eval.
#pragma once

#include <c10/core/Device.h>
#include <torch/optim/adamw.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/rng_state.h"
#include "data/batch_source.h"
#include "dist/data_parallel.h"
#include "model/transformer.h"
#include "train/diagnostics.h"
#include "train/fault_injection.h"
#include "train/spike_detector.h"
#include "train/step_graph.h"
#include "train/train_output.h"

namespace causal {

// What one optimizer step's forward/backward passes produced (gradients are left in the parameters).
struct StepGradients {
  double loss = 0.0;                       // mean loss over the step's valid tokens
  int64_t valid_tokens = 0;                // label positions in the loss, over all micro-batches
  int64_t input_tokens = 0;                // positions fed to the model, padding included
  double max_abs_logit = 0.0;              // of the last micro-batch (diagnostics only)
  std::vector<double> act_rms;             // RMS of the residual stream after each block, last micro-batch
  std::string first_nonfinite_activation;  // "blocks.1.ffn (micro-batch 0)" when a loss was non-finite
  double diagnostics_seconds = 0.0;        // spent on max |logit| and activation RMS
  // The generators as the step's first forward found them: a non-finite loss replays the forwards from
  // here, and a forensics bundle stores it.
  std::optional<GeneratorSnapshot> rng_before;
};

// Where the forward and backward passes of a step spend their time (`causal bench`): each phase is
// timed up to the end of the work it queued on `device`.
struct PhaseTimes {
  c10::Device device = c10::Device(c10::kCPU);
  double forward_ms = 0.0;   // forward and loss, summed over the micro-batches
  double backward_ms = 0.0;  // loss.backward(), summed over the micro-batches
};

// Zeroes the gradients, then accumulates them over `micro_batches` (already on the model's device) with
// one denominator: the valid-token count of the whole step, never a mean of per-micro-batch means. The loss
// is computed as `train.loss_kernel` says.
// With `parallel`, the denominator and the counts
// are global (summed over ranks) and the loss is this rank's share of the global mean. With `phases`,
// each phase is timed (and waits for the device). With `graph`, gradients are zeroed in place, and a step
// it may take (StepGraph::usable, no `phases`) replays its micro-batches from it.
StepGradients accumulate_gradients(Transformer& model, const std::vector<Batch>& micro_batches,
                                   const TrainConfig& train, bool collect_diagnostics,
                                   DataParallel* parallel = nullptr, PhaseTimes* phases = nullptr,
                                   StepGraph* graph = nullptr);

// Global L2 norm of all gradients, before any clipping; then scales them to at most `max_norm`
// (max_norm <= 0: no clipping; a non-finite norm: left unscaled for diagnosis). Returns the pre-clip norm.
double clip_gradients(torch::nn::Module& model, double max_norm);

// One step up to the optimizer update: faults applied, forward/backward (activation RMS and max |logit|
// when `log_row`), per-layer gradient norms (when `diagnose`), the health verdict and clipping.
struct StepOutcome {
  StepGradients grads;
  double grad_norm = 0.0;          // before clipping
  LayerValues layer_grad_norms;    // filled when diagnosed
  bool finite = true;              // loss and gradient norm are finite
  std::string nonfinite_cause;     // when not finite: the first non-finite parameter, activation or gradient
  double allreduce_seconds = 0.0;  // data-parallel: time in this step's collectives
};
// With `parallel`, gradients and loss are summed over ranks right after backward (before the health
// verdict and clipping), so every rank reaches the same verdict, naming the rank that went non-finite.
StepOutcome compute_step(Transformer& model, const std::vector<Batch>& micro_batches,
                         const TrainConfig& train, bool log_row, bool diagnose, const FaultInjection& fault,
                         int64_t step_done, DataParallel* parallel = nullptr, StepGraph* graph = nullptr);

// Where the loop stands; a resumed run starts from the checkpoint's values.
struct TrainProgress {
  int64_t step = 0;               // optimizer steps completed (skipped ones included)
  int64_t tokens_seen = 0;        // input positions fed to the model, padding included
  int64_t skipped_steps = 0;      // updates skipped for non-finite values (nonfinite = "skip")
  int64_t consecutive_skips = 0;  // skipped steps in a row up to now
};

struct TrainSummary {
  TrainProgress progress;            // at the end of the loop
  double final_loss = 0.0;           // training loss of the last step of this process (0 if it took none)
  double seconds = 0.0;              // wall time of this process's loop
  double tokens_per_s = 0.0;         // input positions per second over this process's loop
  double diagnostics_seconds = 0.0;  // of `seconds`, spent on health figures, spike scores and metrics rows
  double allreduce_seconds = 0.0;    // of `seconds`, spent in data-parallel collectives
};

// A step that ends the run: what the forensics bundle needs (micro-batches on the model's device).
struct AbortedStep {
  int64_t step = 0;  // 1-based
  double lr = 0.0;
  std::string message;  // why, naming the first non-finite tensor
  const std::vector<Batch>* micro_batches = nullptr;
  nlohmann::json rng_before;  // the generators before the step's forward pass (rng_json)
};

struct TrainHooks {
  // Evaluation for eval_every: returns the figures to log as an "eval" metrics row.
  std::function<nlohmann::json(Transformer& model, int64_t step)> evaluate;
  // Called after every step (checkpoints, stop requests); returning false ends the loop there.
  std::function<bool(const TrainProgress& progress)> after_step;
  // Called before a NonFiniteError ends the run (nothing was updated): writes forensics, returns a line
  // for the error message ("" for none).
  std::function<std::string(const AbortedStep& step)> on_abort;
};

class Trainer {
 public:
  Trainer(const RunConfig& config, Transformer model, BatchSource& source, TrainOutput& output,
          c10::Device device);
  torch::optim::AdamW& optimizer() { return *optimizer_; }
  SpikeDetector& spike_detector() { return spikes_; }
  // For the "mfu" metric: the model's training FLOPs per input token and the measured matmul peak.
  void set_flops(double flops_per_token, double peak_flops);
  void set_fault(const FaultInjection& fault) { fault_ = fault; }
  // Data-parallel training: `source` then yields this rank's shard; counts, loss and rates are global.
  void set_data_parallel(DataParallel* parallel);
  // Trains from `start` up to config.train.steps, or until after_step returns false. Throws
  // NonFiniteError (after on_abort) when a step is non-finite and nonfinite = "abort", or after
  // max_consecutive_skips skipped steps in a row.
  TrainSummary run(const TrainProgress& start, const TrainHooks& hooks);

 private:
  struct StepPlan;
  StepPlan plan_step(int64_t step) const;
  std::vector<Batch> next_micro_batches();
  void handle_nonfinite(const StepPlan& plan, const StepOutcome& outcome, TrainProgress& progress,
                        const std::vector<Batch>& micro_batches, const TrainHooks& hooks);
  std::vector<double> apply_update(const StepPlan& plan, double& diagnostics_seconds);
  nlohmann::json metrics_row(const StepPlan& plan, const StepOutcome& outcome, const SpikeFlags& spike,
                             const std::vector<double>& update_ratios, const TrainProgress& progress,
                             double tokens_per_s, double elapsed) const;
  void evaluate(int64_t step_done, const TrainHooks& hooks);
  void report_graph(int64_t step_done);

  const RunConfig& config_;
  Transformer model_;
  BatchSource& source_;
  TrainOutput& output_;
  c10::Device device_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  SpikeDetector spikes_;
  FaultInjection fault_;
  double flops_per_token_ = 0.0, peak_flops_ = 0.0;
  int64_t parameters_ = 0;
  DataParallel* parallel_ = nullptr;  // not owned; null for a single process
  std::unique_ptr<StepGraph> graph_;  // train.cuda_graphs "auto" on a GPU of a CAUSAL_CUDA build, one process
  bool graph_captured_reported_ = false, graph_failure_reported_ = false;
};

}  // namespace causal
