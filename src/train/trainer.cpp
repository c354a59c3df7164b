// Training loop implementation.
#include "train/trainer.h"

#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "config/enums.h"
#include "eval/objective.h"
#include "train/health.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace causal {

StepGradients accumulate_gradients(Transformer& model, const std::vector<Batch>& micro_batches,
                                   bool collect_diagnostics) {
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
    ForwardOptions options;
    options.collect_residuals = diagnose;
    ModelOutput result = model->forward(model_inputs(micro_batches[i]), options);
    at::Tensor loss = loss_sum(result.logits, micro_batches[i].labels) / denominator;
    loss.backward();
    out.loss += loss.item<double>();
    if (diagnose) {
      torch::NoGradGuard no_grad;
      out.max_abs_logit = result.logits.abs().max().item<double>();
      for (const at::Tensor& r : result.residuals)
        out.act_rms.push_back(r.pow(2).mean().sqrt().item<double>());
    }
  }
  return out;
}

double clip_gradients(torch::nn::Module& model, double max_norm) {
  const double limit = max_norm > 0 ? max_norm : std::numeric_limits<double>::infinity();
  return torch::nn::utils::clip_grad_norm_(model.parameters(), limit);
}

Trainer::Trainer(const RunConfig& config, Transformer model, BatchSource& source, RunFolder& folder,
                 c10::Device device)
    : config_(config),
      model_(std::move(model)),
      source_(source),
      folder_(folder),
      device_(device),
      optimizer_(make_adamw(*model_, config.train.optimizer)) {}

TrainSummary Trainer::run(const TrainProgress& start, const EvalFn& evaluate, const AfterStepFn& after_step) {
  const TrainConfig& train = config_.train;
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
    const bool log_row = step == 0 || done % train.log_every == 0 || done == train.steps;

    const double lr = lr_at(train, step);
    set_learning_rate(*optimizer_, lr);

    std::vector<Batch> micro_batches;
    for (int64_t i = 0; i < train.grad_accum; ++i) micro_batches.push_back(source_.next().to(device_));
    StepGradients grads = accumulate_gradients(model_, micro_batches, log_row);

    const double grad_norm = clip_gradients(*model_, train.grad_clip);
    const bool finite = std::isfinite(grads.loss) && std::isfinite(grad_norm);
    if (!finite) {
      const std::string what =
          "step " + std::to_string(done) + ": non-finite " +
          (std::isfinite(grads.loss) ? "gradient norm" : "loss") + " (loss=" + std::to_string(grads.loss) +
          ", grad_norm=" + std::to_string(grad_norm) + ", lr=" + std::to_string(lr) + ")";
      if (train.nonfinite == NonfiniteAction::kAbort) throw NonFiniteError(what + "; no update was applied");
      folder_.log().warn("{}; update skipped", what);
      ++progress.skipped_steps;
    } else {
      optimizer_->step();
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
      folder_.append_metrics({{"kind", "train"},
                              {"step", done},
                              {"loss", grads.loss},
                              {"lr", lr},
                              {"grad_norm", grad_norm},
                              {"clipped", train.grad_clip > 0 && grad_norm > train.grad_clip},
                              {"valid_tokens", grads.valid_tokens},
                              {"tokens_per_s", tokens_per_s},
                              {"tokens_seen", progress.tokens_seen},
                              {"elapsed", since_start},
                              {"max_abs_logit", grads.max_abs_logit},
                              {"finite", finite},
                              {"act_rms", grads.act_rms}});
      window_start = Clock::now();
      window_tokens = 0;
    }
    const double overall_rate = since_start > 0 ? static_cast<double>(loop_tokens) / since_start : 0.0;
    progress_line.update(done, grads.loss, lr, overall_rate);

    if (train.eval_every > 0 && done % train.eval_every == 0 && done != train.steps && evaluate) {
      model_->eval();
      nlohmann::json row = evaluate(model_, done);
      model_->train();
      row["kind"] = "eval";
      row["step"] = done;
      folder_.append_metrics(row);
    }
    if (after_step && !after_step(progress)) break;
  }
  progress_line.finish();
  model_->eval();
  summary.seconds = std::chrono::duration<double>(Clock::now() - loop_start).count();
  summary.tokens_per_s = summary.seconds > 0 ? static_cast<double>(loop_tokens) / summary.seconds : 0.0;
  return summary;
}

}  // namespace causal
