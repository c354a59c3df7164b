// Training loop implementation.
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "config/enums.h"
#include "eval/objective.h"
#include "train/checkpoint.h"
#include "train/health.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace causal {
namespace {

void poison_parameter(torch::nn::Module& model, const std::string& name, bool gradient) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    if (item.key() != name) continue;
    torch::Tensor target = gradient ? item.value().mutable_grad() : item.value();
    if (target.defined()) target.fill_(std::numeric_limits<float>::quiet_NaN());
    return;
  }
}

// A fault that could never fire is a typo: refuse it before training starts.
void check_fault_target(torch::nn::Module& model, const FaultInjection& fault, int64_t n_layers) {
  if (fault.kind == FaultInjection::Kind::kNone) return;
  if (fault.kind == FaultInjection::Kind::kActivation) {
    std::vector<std::string> names = {"embed", "final_norm", "logits"};
    for (int64_t i = 0; i < n_layers; ++i) {
      names.push_back("blocks." + std::to_string(i) + ".attn");
      names.push_back("blocks." + std::to_string(i) + ".ffn");
    }
    if (std::find(names.begin(), names.end(), fault.name) == names.end()) {
      throw std::invalid_argument("--inject-fault " + fault.describe() + ": no sub-layer " + fault.name +
                                  " (embed, blocks.<i>.attn, blocks.<i>.ffn, final_norm, logits)");
    }
  } else if (!model.named_parameters().contains(fault.name)) {
    throw std::invalid_argument("--inject-fault " + fault.describe() + ": no parameter " + fault.name +
                                " (names in docs/model.md)");
  }
}

}  // namespace

StepGradients accumulate_gradients(Transformer& model, const std::vector<Batch>& micro_batches,
                                   bool collect_diagnostics, const std::string& poison_sublayer) {
  StepGradients out;
  for (const Batch& b : micro_batches) {
    out.valid_tokens += b.valid_tokens();
    out.input_tokens += b.labels.numel();
  }
  // A step without valid tokens contributes a zero loss and zero gradients instead of 0/0.
  const double denominator = static_cast<double>(std::max<int64_t>(out.valid_tokens, 1));
  model->zero_grad(/*set_to_none=*/true);
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const bool diagnose = collect_diagnostics && i + 1 == micro_batches.size();
    SublayerTrace trace;  // handles to outputs autograd keeps anyway; inspected only on a non-finite loss
    ForwardOptions options;
    options.collect_residuals = diagnose;
    options.trace = &trace;
    options.poison_sublayer = poison_sublayer;
    ModelOutput result = model->forward(model_inputs(micro_batches[i]), options);
    at::Tensor loss = loss_sum(result.logits, micro_batches[i].labels) / denominator;
    loss.backward();
    const double value = loss.item<double>();
    out.loss += value;
    if (!std::isfinite(value) && out.first_nonfinite_activation.empty()) {
      const std::string where = first_nonfinite_activation(trace);
      if (!where.empty()) out.first_nonfinite_activation = where + " (micro-batch " + std::to_string(i) + ")";
    }
    if (diagnose) {
      const auto t0 = std::chrono::steady_clock::now();
      torch::NoGradGuard no_grad;
      out.max_abs_logit = result.logits.abs().max().item<double>();
      for (const at::Tensor& r : result.residuals)
        out.act_rms.push_back(r.pow(2).mean().sqrt().item<double>());
      out.diagnostics_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  return out;
}

double clip_gradients(torch::nn::Module& model, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads, norms;
  for (const auto& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    norms.push_back(p.grad().norm(2));
  }
  if (grads.empty()) return 0.0;
  const torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  const double value = total.item<double>();
  // The same arithmetic as torch::nn::utils::clip_grad_norm_, except that a non-finite norm leaves the
  // gradients alone: scaling by NaN would hide which parameter's gradient went bad first.
  if (max_norm > 0 && std::isfinite(value)) {
    const torch::Tensor coefficient = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
    for (torch::Tensor& g : grads) g.mul_(coefficient);
  }
  return value;
}

StepOutcome compute_step(Transformer& model, const std::vector<Batch>& micro_batches,
                         const TrainConfig& train, bool log_row, bool diagnose, const FaultInjection& fault,
                         int64_t step_done) {
  const bool inject = fault.at(step_done);
  if (inject && fault.kind == FaultInjection::Kind::kWeight) poison_parameter(*model, fault.name, false);
  const std::string poison =
      inject && fault.kind == FaultInjection::Kind::kActivation ? fault.name : std::string();
  StepOutcome out;
  out.grads = accumulate_gradients(model, micro_batches, log_row, poison);
  if (inject && fault.kind == FaultInjection::Kind::kGradient) poison_parameter(*model, fault.name, true);
  if (diagnose) {
    const auto t0 = std::chrono::steady_clock::now();
    out.layer_grad_norms = gradient_norms_by_layer(*model, model->config().n_layers);
    out.grads.diagnostics_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  out.grad_norm = clip_gradients(*model, train.grad_clip);
  out.finite = std::isfinite(out.grads.loss) && std::isfinite(out.grad_norm);
  if (!out.finite) {
    // The root cause in forward order: a bad weight, else the first bad activation, else the backward pass.
    if (std::string p = first_nonfinite_parameter(*model); !p.empty()) {
      out.nonfinite_cause = "parameter " + p + " holds a non-finite value";
    } else if (!out.grads.first_nonfinite_activation.empty()) {
      out.nonfinite_cause =
          "first non-finite activation in forward order: " + out.grads.first_nonfinite_activation;
    } else if (std::string g = first_nonfinite_gradient(*model); !g.empty()) {
      out.nonfinite_cause = "activations finite; first non-finite gradient: " + g;
    } else {
      out.nonfinite_cause = "activations and gradients finite; the loss itself overflowed";
    }
  }
  return out;
}

Trainer::Trainer(const RunConfig& config, Transformer model, BatchSource& source, RunFolder& folder,
                 c10::Device device)
    : config_(config),
      model_(std::move(model)),
      source_(source),
      folder_(folder),
      device_(device),
      optimizer_(make_adamw(*model_, config.train.optimizer)),
      spikes_(config.train.spike_window, config.train.spike_threshold) {
  for (const auto& p : model_->parameters()) parameters_ += p.numel();
}

void Trainer::set_flops(double flops_per_token, double peak_flops) {
  flops_per_token_ = flops_per_token;
  peak_flops_ = peak_flops;
}

TrainSummary Trainer::run(const TrainProgress& start, const TrainHooks& hooks) {
  const TrainConfig& train = config_.train;
  const int64_t n_layers = config_.model.n_layers;
  check_fault_target(*model_, fault_, n_layers);
  using Clock = std::chrono::steady_clock;
  const auto loop_start = Clock::now();
  auto window_start = loop_start;
  int64_t window_tokens = 0, loop_tokens = 0;
  TrainSummary summary;
  summary.progress = start;
  TrainProgress& progress = summary.progress;
  ProgressLine progress_line(start.step, train.steps);
  model_->train();

  for (int64_t step = start.step; step < train.steps; ++step) {
    const int64_t done = step + 1;  // steps are reported 1-based: "after step N"
    const bool diagnose = done % train.diag_every == 0 || step == 0;
    bool log_row = step == 0 || done % train.log_every == 0 || done == train.steps || diagnose;

    const double lr = lr_at(train, step);
    set_learning_rate(*optimizer_, lr);
    auto diagnostics_start = Clock::now();
    const nlohmann::json rng_before = capture_global_rng(device_);
    double diagnostics = std::chrono::duration<double>(Clock::now() - diagnostics_start).count();

    std::vector<Batch> micro_batches;
    for (int64_t i = 0; i < train.grad_accum; ++i) micro_batches.push_back(source_.next().to(device_));
    const StepOutcome outcome = compute_step(model_, micro_batches, train, log_row, diagnose, fault_, done);
    const StepGradients& grads = outcome.grads;
    diagnostics += grads.diagnostics_seconds;

    std::vector<double> ratios;
    if (!outcome.finite) {
      ++progress.skipped_steps;
      ++progress.consecutive_skips;
      const std::string what = "step " + std::to_string(done) + ": non-finite " +
                               (std::isfinite(grads.loss) ? "gradient norm" : "loss") +
                               " (loss=" + std::to_string(grads.loss) +
                               ", grad_norm=" + std::to_string(outcome.grad_norm) +
                               ", lr=" + std::to_string(lr) + "); " + outcome.nonfinite_cause;
      const bool abort = train.nonfinite == NonfiniteAction::kAbort;
      if (abort || progress.consecutive_skips >= train.max_consecutive_skips) {
        const std::string message = abort ? what + "; no update was applied"
                                          : what + "; " + std::to_string(progress.consecutive_skips) +
                                                " consecutive steps skipped (train.max_consecutive_skips)";
        std::string forensics;
        if (hooks.on_abort) forensics = hooks.on_abort({done, lr, message, &micro_batches, rng_before});
        folder_.log().error("{}", message);
        throw NonFiniteError(message + forensics);
      }
      folder_.log().warn("{}; update skipped ({} in a row)", what, progress.consecutive_skips);
      log_row = true;
    } else {
      progress.consecutive_skips = 0;
      std::vector<std::vector<torch::Tensor>> before;
      diagnostics_start = Clock::now();
      if (diagnose) before = snapshot_blocks(*model_, n_layers);
      diagnostics += std::chrono::duration<double>(Clock::now() - diagnostics_start).count();
      optimizer_->step();
      diagnostics_start = Clock::now();
      if (diagnose) ratios = update_ratios(*model_, before);
      diagnostics += std::chrono::duration<double>(Clock::now() - diagnostics_start).count();
    }
    diagnostics_start = Clock::now();
    const SpikeFlags spike = spikes_.observe(grads.loss, outcome.grad_norm);
    if (spike.spike) {
      folder_.log().warn("step {}: spike (loss {:.4g}, z {:.1f}; grad norm {:.4g}, z {:.1f})", done,
                         grads.loss, spike.loss_z, outcome.grad_norm, spike.grad_norm_z);
      log_row = true;
    }
    progress.step = done;
    progress.tokens_seen += grads.input_tokens;
    summary.final_loss = grads.loss;
    window_tokens += grads.input_tokens;
    loop_tokens += grads.input_tokens;

    const double since_start = std::chrono::duration<double>(Clock::now() - loop_start).count();
    if (log_row) {
      const double window = std::chrono::duration<double>(Clock::now() - window_start).count();
      const double tokens_per_s = window > 0 ? static_cast<double>(window_tokens) / window : 0.0;
      const bool clipping = train.grad_clip > 0;
      nlohmann::json row = {
          {"kind", "train"},
          {"step", done},
          {"loss", grads.loss},
          {"lr", lr},
          {"grad_norm", outcome.grad_norm},
          {"grad_norm_after_clip",
           clipping ? std::min(outcome.grad_norm, train.grad_clip) : outcome.grad_norm},
          {"clipped", clipping && outcome.grad_norm > train.grad_clip},
          {"valid_tokens", grads.valid_tokens},
          {"tokens_per_s", tokens_per_s},
          {"mfu", peak_flops_ > 0 ? tokens_per_s * flops_per_token_ / peak_flops_ : 0.0},
          {"tokens_seen", progress.tokens_seen},
          {"tokens_per_param", static_cast<double>(progress.tokens_seen) / static_cast<double>(parameters_)},
          {"elapsed", since_start},
          {"peak_rss_mib", peak_rss_mib()},
          {"max_abs_logit", grads.max_abs_logit},
          {"finite", outcome.finite},
          {"skipped_steps", progress.skipped_steps},
          {"act_rms", grads.act_rms},
          {"spike", spike.spike},
          {"loss_z", spike.loss_z},
          {"grad_norm_z", spike.grad_norm_z}};
      if (diagnose) {
        row["embed_grad_norm"] = outcome.layer_grad_norms.embed;
        row["layer_grad_norm"] = outcome.layer_grad_norms.blocks;
        row["head_grad_norm"] = outcome.layer_grad_norms.head;
        if (!ratios.empty()) row["update_ratio"] = ratios;
      }
      folder_.append_metrics(row);
      window_start = Clock::now();
      window_tokens = 0;
    }
    summary.diagnostics_seconds +=
        diagnostics + std::chrono::duration<double>(Clock::now() - diagnostics_start).count();
    const double overall_rate = since_start > 0 ? static_cast<double>(loop_tokens) / since_start : 0.0;
    progress_line.update(done, grads.loss, lr, overall_rate);

    if (train.eval_every > 0 && done % train.eval_every == 0 && done != train.steps && hooks.evaluate) {
      model_->eval();
      nlohmann::json row = hooks.evaluate(model_, done);
      model_->train();
      row["kind"] = "eval";
      row["step"] = done;
      folder_.append_metrics(row);
    }
    if (hooks.after_step && !hooks.after_step(progress)) break;
  }
  progress_line.finish();
  model_->eval();
  summary.seconds = std::chrono::duration<double>(Clock::now() - loop_start).count();
  summary.tokens_per_s = summary.seconds > 0 ? static_cast<double>(loop_tokens) / summary.seconds : 0.0;
  return summary;
}

}  // namespace causal
