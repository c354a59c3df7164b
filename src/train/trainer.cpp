// Training loop implementation.
#include "train/trainer.h"

#include <ATen/Context.h>
#include <spdlog/logger.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "checkpoint/checkpoint.h"
#include "config/enums.h"
#include "core/errors.h"
#include "core/optim_compat.h"
#include "core/runtime.h"
#include "core/scoped_timer.h"
#include "model/count_parameters.h"
#include "task/objective.h"
#include "train/forward_observers.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace causal {
namespace {

// The forward passes of micro-batches 0..failed again, from the generators as the step found them, with
// every sub-layer output of the last one traced: the first non-finite one in forward order, or "". The
// parameters are still those the forwards ran with, and backward draws nothing, so the replayed forwards
// draw the masks the step drew. The generators are left where the step left them, so training goes on as
// if nothing had been replayed.
std::string replay_first_nonfinite_activation(Transformer& model, const std::vector<Batch>& micro_batches,
                                              size_t failed, const GeneratorSnapshot& step_start) {
  const GeneratorSnapshot after = GeneratorSnapshot::capture(step_start.device_kind());
  step_start.restore();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < failed; ++i) model->forward(model_inputs(micro_batches[i]));
  SublayerTrace trace;
  std::string where;
  {
    const ForwardHooks::Registration watching(model->hooks(), trace);
    model->forward(model_inputs(micro_batches[failed]));
    where = first_nonfinite_activation(trace);
  }
  after.restore();
  return where;
}

}  // namespace

StepGradients accumulate_gradients(Transformer& model, const std::vector<Batch>& micro_batches,
                                   const TrainConfig& train, bool collect_diagnostics, DataParallel* parallel,
                                   PhaseTimes* phases, StepGraph* graph) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point phase_start = Clock::now();
  // Ends the current phase into `total` (when timed) and starts the next.
  auto end_phase = [&](double PhaseTimes::*total) {
    if (phases == nullptr) return;
    synchronize(phases->device);
    const Clock::time_point now = Clock::now();
    phases->*total += std::chrono::duration<double, std::milli>(now - phase_start).count();
    phase_start = now;
  };
  StepGradients out;
  for (const Batch& b : micro_batches) {
    out.valid_tokens += b.valid_tokens();
    out.input_tokens += b.labels.numel();
  }
  if (parallel != nullptr) {
    // Weighted by valid tokens: N ranks x batch b take the same step as one rank x batch N*b.
    const std::vector<int64_t> global = parallel->sum_counts(out.valid_tokens, out.input_tokens);
    out.valid_tokens = global[0];
    out.input_tokens = global[1];
  }
  // A step without valid tokens contributes a zero loss and zero gradients instead of 0/0.
  const double denominator = static_cast<double>(std::max<int64_t>(out.valid_tokens, 1));
  // A graph writes into the gradients' storage, so beside one they are zeroed in place, not dropped.
  if (graph != nullptr) {
    graph->zero_gradients(model);
  } else {
    model->zero_grad(/*set_to_none=*/true);
  }
  const bool graphed =
      graph != nullptr && phases == nullptr && graph->usable(model, collect_diagnostics, parallel != nullptr);
  // The loss sum's gradient, as the division below gives it: 1 / denominator in float32.
  const float scale = 1.0f / static_cast<float>(denominator);
  if (!micro_batches.empty()) out.rng_before = GeneratorSnapshot::capture(micro_batches[0].tokens.device());
  // Watching only a diagnosed step: a watched block output must be summed inside the block, and a watched
  // forward cannot replay from a graph.
  ResidualStream residuals;
  std::optional<ForwardHooks::Registration> watching;
  if (collect_diagnostics) watching.emplace(model->hooks(), residuals);
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const bool diagnose = collect_diagnostics && i + 1 == micro_batches.size();
    residuals.arm(diagnose);
    if (phases != nullptr) phase_start = Clock::now();
    TrainingLoss result;
    at::Tensor loss;
    if (graphed) {
      const at::Tensor sum = graph->run(model, micro_batches[i], train, scale);
      if (sum.defined()) loss = sum / denominator;
    }
    if (!loss.defined()) {  // eagerly
      result = training_loss_sum(model, micro_batches[i], train, diagnose);
      loss = result.sum / denominator;
      end_phase(&PhaseTimes::forward_ms);
      if (parallel != nullptr && i + 1 == micro_batches.size()) parallel->before_last_backward();
      loss.backward();
      end_phase(&PhaseTimes::backward_ms);
    }
    const double value = loss.item<double>();
    out.loss += value;
    if (diagnose) {
      ScopedTimer timer(out.diagnostics_seconds);
      torch::NoGradGuard no_grad;
      out.max_abs_logit = result.max_abs_logit.item<double>();
      out.act_rms = residuals.rms();
      residuals.arm(false);
    }
    if (!std::isfinite(value) && out.first_nonfinite_activation.empty()) {
      // Tracing every step instead would keep each sub-layer's output, which autograd frees, until
      // backward ends: 36-68 MiB at bench shape L (docs/bench.md#recomputed-ffn-activation).
      const std::string where = replay_first_nonfinite_activation(model, micro_batches, i, *out.rng_before);
      if (!where.empty()) out.first_nonfinite_activation = where + " (micro-batch " + std::to_string(i) + ")";
    }
  }
  return out;
}

double clip_gradients(torch::nn::Module& model, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : model.parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  // One call for every tensor's norm (bit-identical to each one's norm(2)): a small model's step is
  // dispatch-bound, and a norm per tensor would be two dispatches each.
  const std::vector<torch::Tensor> norms = at::_foreach_norm(grads);
  const torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  const double value = total.item<double>();
  // The same arithmetic as torch::nn::utils::clip_grad_norm_, except that a non-finite norm leaves the
  // gradients alone: scaling by NaN would hide which parameter's gradient went bad first.
  if (max_norm > 0 && std::isfinite(value)) {
    const torch::Tensor coefficient = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
    // A coefficient of 1 leaves every gradient bit as it is: no pass over them (one op per parameter).
    if (coefficient.item<float>() < 1.0f) scale_all(grads, coefficient);
  }
  return value;
}

namespace {

// The root cause in forward order: a bad weight, else the first bad activation, else the backward pass.
std::string nonfinite_cause(Transformer& model, const StepGradients& grads) {
  if (std::string p = first_nonfinite_parameter(*model); !p.empty())
    return "parameter " + p + " holds a non-finite value";
  if (!grads.first_nonfinite_activation.empty())
    return "first non-finite activation in forward order: " + grads.first_nonfinite_activation;
  if (std::string g = first_nonfinite_gradient(*model); !g.empty())
    return "activations finite; first non-finite gradient: " + g;
  return "activations and gradients finite; the loss itself overflowed";
}

// Data-parallel: this rank's diagnosis is made before the sum spreads a bad value to every rank.
void sum_over_ranks(Transformer& model, DataParallel& parallel, int64_t step_done, bool edited_gradients,
                    StepOutcome& out) {
  std::vector<at::Tensor> gradients;
  for (const auto& p : model->parameters())
    if (p.grad().defined()) gradients.push_back(p.grad());
  const bool finite = std::isfinite(out.grads.loss) && DataParallel::all_finite(gradients);
  const std::string cause = finite ? std::string() : nonfinite_cause(model, out.grads);
  const GradientSumResult sum =
      parallel.sum_gradients(out.grads.loss, finite, cause, step_done, edited_gradients);
  out.grads.loss = sum.loss;
  if (sum.bad_rank >= 0)
    out.nonfinite_cause = "on rank " + std::to_string(sum.bad_rank) + ": " + sum.bad_cause;
  out.allreduce_seconds = parallel.take_seconds();
}

}  // namespace

StepOutcome compute_step(Transformer& model, const std::vector<Batch>& micro_batches,
                         const TrainConfig& train, bool log_row, bool diagnose, const FaultInjection& fault,
                         int64_t step_done, DataParallel* parallel, StepGraph* graph) {
  const bool inject = fault.at(step_done);
  if (inject && fault.kind == FaultInjection::Kind::kWeight) poison_parameter(*model, fault.name, false);
  StepOutcome out;
  {
    std::optional<ActivationFault> activation;
    std::optional<ForwardHooks::Registration> poisoning;
    if (inject && fault.kind == FaultInjection::Kind::kActivation) {
      activation.emplace(fault.name, model->config().n_layers, fault.describe());
      poisoning.emplace(model->hooks(), *activation);
    }
    out.grads = accumulate_gradients(model, micro_batches, train, log_row, parallel, nullptr, graph);
  }
  const bool poison_gradient = inject && fault.kind == FaultInjection::Kind::kGradient;
  if (poison_gradient) poison_parameter(*model, fault.name, true);
  if (parallel != nullptr) sum_over_ranks(model, *parallel, step_done, poison_gradient, out);
  if (diagnose) {
    ScopedTimer timer(out.grads.diagnostics_seconds);
    out.layer_grad_norms = gradient_norms_by_layer(*model, model->config().n_layers);
  }
  out.grad_norm = clip_gradients(*model, train.grad_clip);
  out.finite = std::isfinite(out.grads.loss) && std::isfinite(out.grad_norm);
  if (!out.finite && out.nonfinite_cause.empty()) out.nonfinite_cause = nonfinite_cause(model, out.grads);
  return out;
}

namespace {

// Input tokens per second since construction or the last reset.
class TokenRate {
 public:
  void add(int64_t tokens) { tokens_ += tokens; }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double per_second() const {
    const double s = seconds();
    return s > 0 ? static_cast<double>(tokens_) / s : 0.0;
  }
  void reset() {
    start_ = Clock::now();
    tokens_ = 0;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_ = Clock::now();
  int64_t tokens_ = 0;
};

}  // namespace

// What this step does besides the update itself.
struct Trainer::StepPlan {
  int64_t done = 0;       // steps completed after this one (reported 1-based: "after step N")
  double lr = 0.0;        // lr_at(step)
  bool diagnose = false;  // per-layer gradient norms and update/weight ratios
  bool log_row = false;   // a metrics row; a skipped step or a spike adds one
};

Trainer::Trainer(const RunConfig& config, Transformer model, BatchSource& source, TrainOutput& output,
                 c10::Device device)
    : config_(config),
      model_(std::move(model)),
      source_(source),
      output_(output),
      device_(device),
      optimizer_(make_adamw(*model_, config.train.optimizer)),
      spikes_(config.train.spike_window, config.train.spike_threshold),
      parameters_(count_parameters(*model_)),
      graph_(StepGraph::for_run(config.train, device)) {}

void Trainer::set_flops(double flops_per_token, double peak_flops) {
  flops_per_token_ = flops_per_token;
  peak_flops_ = peak_flops;
}

void Trainer::set_data_parallel(DataParallel* parallel) {
  parallel_ = parallel;
  if (parallel_ != nullptr) parallel_->attach(trainable_parameters(*model_).values());
  if (parallel_ != nullptr) graph_.reset();  // the reduction hooks into backward, outside any graph
}

Trainer::StepPlan Trainer::plan_step(int64_t step) const {
  const TrainConfig& train = config_.train;
  StepPlan plan;
  plan.done = step + 1;
  plan.lr = lr_at(train, step);
  plan.diagnose = plan.done % train.diag_every == 0 || step == 0;
  plan.log_row = step == 0 || plan.done % train.log_every == 0 || plan.done == train.steps || plan.diagnose;
  return plan;
}

std::vector<Batch> Trainer::next_micro_batches() {
  std::vector<Batch> micro_batches;
  for (int64_t i = 0; i < config_.train.grad_accum; ++i) micro_batches.push_back(source_.next().to(device_));
  return micro_batches;
}

// A non-finite step is never applied: with nonfinite = "abort" (or too many skips in a row) the run ends
// here, after on_abort saved what the step needs to be replayed; with "skip" it is counted and logged.
void Trainer::handle_nonfinite(const StepPlan& plan, const StepOutcome& outcome, TrainProgress& progress,
                               const std::vector<Batch>& micro_batches, const TrainHooks& hooks) {
  const TrainConfig& train = config_.train;
  ++progress.skipped_steps;
  ++progress.consecutive_skips;
  const double loss = outcome.grads.loss;
  const std::string what = "step " + std::to_string(plan.done) + ": non-finite " +
                           (std::isfinite(loss) ? "gradient norm" : "loss") +
                           " (loss=" + std::to_string(loss) +
                           ", grad_norm=" + std::to_string(outcome.grad_norm) +
                           ", lr=" + std::to_string(plan.lr) + "); " + outcome.nonfinite_cause;
  const bool abort = train.nonfinite == NonfiniteAction::kAbort;
  if (abort || progress.consecutive_skips >= train.max_consecutive_skips) {
    const std::string message = abort ? what + "; no update was applied"
                                      : what + "; " + std::to_string(progress.consecutive_skips) +
                                            " consecutive steps skipped (train.max_consecutive_skips)";
    std::string forensics;
    if (hooks.on_abort) {
      const nlohmann::json rng_before =
          outcome.grads.rng_before ? rng_json(*outcome.grads.rng_before) : nlohmann::json::object();
      forensics = hooks.on_abort({plan.done, plan.lr, message, &micro_batches, rng_before});
    }
    output_.log().error("{}", message);
    throw NonFiniteError(message + forensics);
  }
  output_.log().warn("{}; update skipped ({} in a row)", what, progress.consecutive_skips);
}

// The optimizer step; on diagnosed steps also each block's update/weight ratio (timed as diagnostics).
std::vector<double> Trainer::apply_update(const StepPlan& plan, double& diagnostics_seconds) {
  const int64_t n_layers = config_.model.n_layers;
  std::vector<std::vector<torch::Tensor>> before;
  if (plan.diagnose) {
    ScopedTimer timer(diagnostics_seconds);
    before = snapshot_blocks(*model_, n_layers);
  }
  optimizer_->step();
  if (!plan.diagnose) return {};
  ScopedTimer timer(diagnostics_seconds);
  return update_ratios(*model_, before);
}

nlohmann::json Trainer::metrics_row(const StepPlan& plan, const StepOutcome& outcome, const SpikeFlags& spike,
                                    const std::vector<double>& update_ratios, const TrainProgress& progress,
                                    double tokens_per_s, double elapsed) const {
  const TrainConfig& train = config_.train;
  const StepGradients& grads = outcome.grads;
  const bool clipping = train.grad_clip > 0;
  nlohmann::json row = {
      {"kind", "train"},
      {"step", plan.done},
      {"loss", grads.loss},
      {"lr", plan.lr},
      {"grad_norm", outcome.grad_norm},
      {"grad_norm_after_clip", clipping ? std::min(outcome.grad_norm, train.grad_clip) : outcome.grad_norm},
      {"clipped", clipping && outcome.grad_norm > train.grad_clip},
      {"valid_tokens", grads.valid_tokens},
      {"tokens_per_s", tokens_per_s},
      {"mfu", peak_flops_ > 0 ? tokens_per_s * flops_per_token_ / peak_flops_ : 0.0},
      {"tokens_seen", progress.tokens_seen},
      {"tokens_per_param", static_cast<double>(progress.tokens_seen) / static_cast<double>(parameters_)},
      {"elapsed", elapsed},
      {"peak_rss_mib", peak_rss_mib()},
      {"max_abs_logit", grads.max_abs_logit},
      {"finite", outcome.finite},
      {"skipped_steps", progress.skipped_steps},
      {"act_rms", grads.act_rms},
      {"spike", spike.spike},
      {"loss_z", spike.loss_z},
      {"grad_norm_z", spike.grad_norm_z}};
  if (plan.diagnose) {
    row["embed_grad_norm"] = outcome.layer_grad_norms.embed;
    row["layer_grad_norm"] = outcome.layer_grad_norms.blocks;
    row["head_grad_norm"] = outcome.layer_grad_norms.head;
    if (!update_ratios.empty()) row["update_ratio"] = update_ratios;
  }
  return row;
}

// The log says once when the step first ran from a CUDA graph, and once why graphs stopped if a capture
// failed (the run goes on eagerly).
void Trainer::report_graph(int64_t step_done) {
  if (graph_ == nullptr) return;
  if (!graph_captured_reported_ && graph_->captures() > 0) {
    output_.log().info(
        "step {}: forward and backward replay from a CUDA graph from here on (train.cuda_graphs)", step_done);
    graph_captured_reported_ = true;
  }
  if (!graph_failure_reported_ && !graph_->disabled_reason().empty()) {
    output_.log().warn("step {}: capturing a CUDA graph failed, training on eagerly: {}", step_done,
                       graph_->disabled_reason());
    graph_failure_reported_ = true;
  }
}

// eval_every: an "eval" metrics row from the hook (the final evaluation is the caller's).
void Trainer::evaluate(int64_t step_done, const TrainHooks& hooks) {
  const TrainConfig& train = config_.train;
  if (train.eval_every <= 0 || step_done % train.eval_every != 0 || step_done == train.steps ||
      !hooks.evaluate)
    return;
  model_->eval();
  nlohmann::json row = hooks.evaluate(model_, step_done);
  model_->train();
  row["kind"] = "eval";
  row["step"] = step_done;
  output_.append_metrics(row);
}

TrainSummary Trainer::run(const TrainProgress& start, const TrainHooks& hooks) {
  check_fault_target(*model_, fault_, config_.model.n_layers);
  TrainSummary summary;
  summary.progress = start;
  TrainProgress& progress = summary.progress;
  TokenRate loop_rate, window_rate;  // since the loop started; since the last metrics row
  ProgressLine progress_line(start.step, config_.train.steps);
  model_->train();

  for (int64_t step = start.step; step < config_.train.steps; ++step) {
    StepPlan plan = plan_step(step);
    set_learning_rate(*optimizer_, plan.lr);
    double diagnostics = 0.0;
    const std::vector<Batch> micro_batches = next_micro_batches();
    // Forward/backward over the micro-batches, then the health verdict and clipping.
    const StepOutcome outcome = compute_step(model_, micro_batches, config_.train, plan.log_row,
                                             plan.diagnose, fault_, plan.done, parallel_, graph_.get());
    report_graph(plan.done);
    summary.allreduce_seconds += outcome.allreduce_seconds;
    diagnostics += outcome.grads.diagnostics_seconds;
    std::vector<double> ratios;
    if (outcome.finite) {
      progress.consecutive_skips = 0;
      ratios = apply_update(plan, diagnostics);
    } else {
      handle_nonfinite(plan, outcome, progress, micro_batches, hooks);
      plan.log_row = true;
    }

    const int64_t tokens = outcome.grads.input_tokens;
    progress.step = plan.done;
    progress.tokens_seen += tokens;
    summary.final_loss = outcome.grads.loss;
    loop_rate.add(tokens);
    window_rate.add(tokens);
    {
      ScopedTimer timer(diagnostics);
      const SpikeFlags spike = spikes_.observe(outcome.grads.loss, outcome.grad_norm);
      if (spike.spike) {
        output_.log().warn("step {}: spike (loss {:.4g}, z {:.1f}; grad norm {:.4g}, z {:.1f})", plan.done,
                           outcome.grads.loss, spike.loss_z, outcome.grad_norm, spike.grad_norm_z);
        plan.log_row = true;
      }
      if (plan.log_row) {
        nlohmann::json row = metrics_row(plan, outcome, spike, ratios, progress, window_rate.per_second(),
                                         loop_rate.seconds());
        if (parallel_ != nullptr) {
          row["world_size"] = parallel_->world_size();
          row["allreduce_s"] = outcome.allreduce_seconds;
        }
        output_.append_metrics(row);
        window_rate.reset();
      }
    }
    summary.diagnostics_seconds += diagnostics;
    progress_line.update(plan.done, outcome.grads.loss, plan.lr, loop_rate.per_second());

    evaluate(plan.done, hooks);
    if (hooks.after_step && !hooks.after_step(progress)) break;  // checkpoints and stop requests
  }
  progress_line.finish();
  model_->eval();
  summary.seconds = loop_rate.seconds();
  summary.tokens_per_s = loop_rate.per_second();
  return summary;
}

}  // namespace causal
