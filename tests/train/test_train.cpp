// Contracts of the training loop's pieces: the LR schedule, gradient accumulation and the pre-clip norm.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <optional>

#include "config/config.h"
#include "core/errors.h"
#include "core/optim_compat.h"
#include "model/transformer.h"
#include "support/tolerance.h"
#include "task/objective.h"
#include "train/flat_adamw.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/trainer.h"

using namespace causal;
using Catch::Detail::Approx;

namespace {

TrainConfig schedule(ScheduleKind kind, int64_t steps, int64_t warmup) {
  TrainConfig t;
  t.steps = steps;
  t.optimizer.lr = 1.0;
  t.schedule.kind = kind;
  t.schedule.warmup_steps = warmup;
  t.schedule.min_lr_ratio = 0.1;
  t.schedule.decay_fraction = 0.2;
  return t;
}

ModelConfig tiny_text_model() {
  ModelConfig m;
  m.inputs = {InputField{"token", 11}};
  m.output_vocab = 11;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 2;
  m.n_kv_heads = 2;
  m.ffn_hidden = 32;
  m.max_seq_len = 8;
  return m;
}

// A batch of random tokens whose labels are partly ignored: `valid` label positions per row.
Batch random_batch(int64_t rows, int64_t t, int64_t valid) {
  Batch b;
  b.tokens = torch::randint(11, {rows, t, 1}, torch::kLong);
  b.positions = torch::arange(t, torch::kLong).unsqueeze(0).expand({rows, t}).contiguous();
  b.labels = torch::randint(11, {rows, t}, torch::kLong);
  b.labels.slice(1, valid, t).fill_(kIgnoreLabel);
  return b;
}

Batch concat(const Batch& a, const Batch& b) {
  return Batch{torch::cat({a.tokens, b.tokens}), torch::cat({a.positions, b.positions}), at::Tensor(),
               at::Tensor(), torch::cat({a.labels, b.labels})};
}

// The bound on any logit's rounding difference (tolerance.h) over the rows of `batch` (T = 8).
double logit_bound_over(Transformer& model, const Batch& batch) {
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(model_inputs(batch)).logits;
  return testing::logits_bound(model->config(), logits, 8, 8).max().item<double>();
}

}  // namespace

CATCH_TEST_CASE("lr_at: warmup ramps to the peak and decays reach the floor at the last step",
                "[unit][train]") {
  for (ScheduleKind kind : {ScheduleKind::kLinear, ScheduleKind::kCosine, ScheduleKind::kWsd}) {
    TrainConfig t = schedule(kind, 100, 10);
    CATCH_CHECK(lr_at(t, 0) == Approx(0.1));
    CATCH_CHECK(lr_at(t, 9) == Approx(1.0));  // last warmup step is at the peak
    CATCH_CHECK(lr_at(t, 10) == Approx(1.0).epsilon(0.02));
    CATCH_CHECK(lr_at(t, 99) == Approx(0.1));  // floor = lr * min_lr_ratio at the final step
    for (int64_t s = 10; s < 99; ++s) CATCH_CHECK(lr_at(t, s + 1) <= lr_at(t, s) + 1e-12);  // never rises
  }
  TrainConfig c = schedule(ScheduleKind::kConstant, 50, 5);
  CATCH_CHECK(lr_at(c, 2) == Approx(0.6));
  CATCH_CHECK(lr_at(c, 49) == Approx(1.0));
  TrainConfig cos = schedule(ScheduleKind::kCosine, 101, 0);
  CATCH_CHECK(lr_at(cos, 50) == Approx(0.55));  // half way: (peak + floor) / 2
  TrainConfig lin = schedule(ScheduleKind::kLinear, 101, 0);
  CATCH_CHECK(lr_at(lin, 50) == Approx(0.55));
}

CATCH_TEST_CASE("lr_at: wsd holds the peak, then decays over the final fraction", "[unit][train]") {
  TrainConfig t = schedule(ScheduleKind::kWsd, 110, 10);  // 100 post-warmup steps, the last 20 decay
  CATCH_CHECK(lr_at(t, 89) == Approx(1.0));
  CATCH_CHECK(lr_at(t, 90) < 1.0);
  CATCH_CHECK(lr_at(t, 109) == Approx(0.1));
}

// Accumulating k micro-batches equals one batch holding all rows, loss and every gradient, even when the
// micro-batches hold different numbers of valid labels (a mean of means would differ).
CATCH_TEST_CASE("gradient accumulation equals one big batch", "[contract][train][numerics]") {
  torch::manual_seed(3);
  Transformer model(tiny_text_model());
  Batch a = random_batch(2, 8, 2), b = random_batch(3, 8, 7);
  StepGradients big = accumulate_gradients(model, {concat(a, b)}, TrainConfig{}, false);
  std::vector<torch::Tensor> big_grads;
  for (auto& p : model->parameters()) big_grads.push_back(p.grad().clone());
  StepGradients accumulated = accumulate_gradients(model, {a, b}, TrainConfig{}, false);
  CATCH_CHECK(big.valid_tokens == 2 * 2 + 3 * 7);
  CATCH_CHECK(accumulated.valid_tokens == big.valid_tokens);
  // Both compute every row's logits, loss and gradient terms, grouped otherwise (tolerance.h (4)).
  const ModelConfig& c = model->config();
  const double logit_bound = logit_bound_over(model, concat(a, b));
  CATCH_CHECK(testing::scalars_close(accumulated.loss, big.loss,
                                     testing::loss_bound(logit_bound, big.loss, big.valid_tokens), "loss"));
  size_t i = 0;
  for (auto& p : model->parameters()) {
    const torch::Tensor& expected = big_grads[i++];
    CATCH_CHECK(testing::within(p.grad(), expected, testing::gradient_bound(c, expected, 8, 8, 8, 5 * 8),
                                "parameter " + std::to_string(i - 1)));
  }
  // Guard: a mean of per-micro-batch means is measurably different here.
  torch::NoGradGuard no_grad;
  auto mean_loss = [&](const Batch& x) {
    return (loss_sum(model->forward(model_inputs(x)).logits, x.labels) / x.valid_tokens()).item<double>();
  };
  const double mean_of_means = (mean_loss(a) + mean_loss(b)) / 2;
  CATCH_CHECK(std::abs(mean_of_means - big.loss) > 1e-3);
}

// train.loss_kernel "chunked" (model/head_loss.h) against "logits": the same step, loss, max |logit| and
// every gradient, with an untied head (its bias too) and with a tied one, over chunks that split rows of a
// sequence, with ignored labels. "auto" keeps a batch this small on the logits path, bit for bit.
CATCH_TEST_CASE("accumulate_gradients: the chunked loss takes the logits path's step", "[contract][train]") {
  for (const bool tied : {false, true}) {
    CATCH_INFO("tied " << tied);
    ModelConfig m = tiny_text_model();
    m.tie_embeddings = tied;
    torch::manual_seed(6);
    Transformer model(m);
    const Batch a = random_batch(2, 8, 5), b = random_batch(3, 8, 8);
    TrainConfig chunked, logits, automatic;
    chunked.loss_kernel = LossKernel::kChunked;
    chunked.loss_chunk_rows = 5;
    logits.loss_kernel = LossKernel::kLogits;
    const auto step = [&](const TrainConfig& train, std::vector<torch::Tensor>& grads) {
      const StepGradients g = accumulate_gradients(model, {a, b}, train, /*collect_diagnostics=*/true);
      grads.clear();
      for (auto& p : model->parameters()) grads.push_back(p.grad().clone());
      return g;
    };
    std::vector<torch::Tensor> chunked_grads, logits_grads, auto_grads;
    const StepGradients c = step(chunked, chunked_grads);
    const StepGradients l = step(logits, logits_grads);
    const StepGradients x = step(automatic, auto_grads);
    const double logit_bound = logit_bound_over(model, concat(a, b));
    CATCH_CHECK(testing::scalars_close(c.loss, l.loss,
                                       testing::loss_bound(logit_bound, l.loss, l.valid_tokens), "loss"));
    CATCH_CHECK(c.max_abs_logit == Approx(l.max_abs_logit).epsilon(1e-5));
    for (size_t i = 0; i < logits_grads.size(); ++i) {
      CATCH_CHECK(testing::within(chunked_grads[i], logits_grads[i],
                                  testing::gradient_bound(m, logits_grads[i], 8, 8, 8, 5 * 8),
                                  "parameter " + std::to_string(i)));
      CATCH_CHECK(torch::equal(auto_grads[i], logits_grads[i]));
    }
    CATCH_CHECK(x.loss == l.loss);
  }
}

namespace {

// Doubles the logits it sees: a stand-in for a fault injected there.
struct LogitsDoubler : ForwardObserver {
  int calls = 0;
  bool watches(HookPoint point) const override { return point == HookPoint::kLogits; }
  at::Tensor observe(const HookSite&, const at::Tensor& value) override {
    ++calls;
    return value * 2;
  }
};

}  // namespace

CATCH_TEST_CASE("accumulate_gradients: an observer of the logits gets them under the chunked loss too",
                "[contract][train]") {
  torch::manual_seed(7);
  Transformer model(tiny_text_model());
  const Batch a = random_batch(2, 8, 8);
  TrainConfig chunked;
  chunked.loss_kernel = LossKernel::kChunked;
  chunked.loss_chunk_rows = 4;
  const double plain = accumulate_gradients(model, {a}, chunked, false).loss;
  LogitsDoubler doubler;
  const ForwardHooks::Registration watching(model->hooks(), doubler);
  const double doubled = accumulate_gradients(model, {a}, chunked, false).loss;
  CATCH_CHECK(doubler.calls == 1);
  CATCH_CHECK(doubled != plain);
}

// A step whose labels are all ignored gives loss 0 and zero gradients, never NaN.
CATCH_TEST_CASE("a step without valid tokens has zero loss and finite gradients", "[contract][train]") {
  torch::manual_seed(4);
  Transformer model(tiny_text_model());
  StepGradients g = accumulate_gradients(model, {random_batch(2, 8, 0)}, TrainConfig{}, true);
  CATCH_CHECK(g.valid_tokens == 0);
  CATCH_CHECK(g.loss == 0.0);
  for (auto& p : model->parameters()) {
    if (p.grad().defined()) CATCH_CHECK(p.grad().abs().max().item<double>() == 0.0);
  }
}

// The logged grad norm is the global L2 norm before clipping, computed here independently in double.
CATCH_TEST_CASE("clip_gradients returns the pre-clip global norm and clips to max_norm",
                "[contract][train]") {
  torch::manual_seed(5);
  Transformer model(tiny_text_model());
  accumulate_gradients(model, {random_batch(4, 8, 8)}, TrainConfig{}, false);
  double sum_sq = 0;
  for (auto& p : model->parameters()) sum_sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  const double expected = std::sqrt(sum_sq);
  const double max_norm = expected / 4;  // well below the norm, so clipping must act
  const double reported = clip_gradients(*model, max_norm);
  CATCH_CHECK(reported == Approx(expected).epsilon(1e-5));
  double after = 0;
  for (auto& p : model->parameters()) after += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  CATCH_CHECK(std::sqrt(after) == Approx(max_norm).epsilon(1e-4));
  // max_norm 0 means "no clipping": the norm is reported and gradients stay as they are.
  const double unclipped = clip_gradients(*model, 0.0);
  CATCH_CHECK(unclipped == Approx(max_norm).epsilon(1e-4));
}

// Norm weights, biases and embeddings are left undecayed unless the switch asks otherwise.
CATCH_TEST_CASE("AdamW groups put norms, biases and embeddings out of weight decay", "[unit][train]") {
  CATCH_CHECK(is_no_decay_parameter("embed.token.weight"));
  CATCH_CHECK(is_no_decay_parameter("pos_embed.weight"));
  CATCH_CHECK(is_no_decay_parameter("blocks.0.attn_norm.weight"));
  CATCH_CHECK(is_no_decay_parameter("blocks.0.attn.q_proj.bias"));
  CATCH_CHECK(is_no_decay_parameter("final_norm.weight"));
  CATCH_CHECK_FALSE(is_no_decay_parameter("blocks.0.attn.q_proj.weight"));
  CATCH_CHECK_FALSE(is_no_decay_parameter("head.weight"));
  torch::manual_seed(6);
  Transformer model(tiny_text_model());
  OptimizerConfig o;
  o.weight_decay = 0.5;
  auto opt = make_adamw(*model, o);
  CATCH_REQUIRE(opt->param_groups().size() == 2);
  auto& decayed = static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[0].options());
  auto& kept = static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[1].options());
  CATCH_CHECK(decayed.weight_decay() == 0.5);
  CATCH_CHECK(kept.weight_decay() == 0.0);
  CATCH_CHECK(opt->param_groups()[0].params().size() + opt->param_groups()[1].params().size() ==
              model->parameters().size());
}

CATCH_TEST_CASE("make_adamw: train.optimizer.kernel picks the AdamW kernel, and fused is refused without one",
                "[unit][train]") {
  Transformer model(tiny_text_model());
  OptimizerConfig config;
  CATCH_CHECK(config.kernel == OptimizerKernel::kAuto);
  auto flat = [](const std::unique_ptr<torch::optim::AdamW>& o) { return dynamic_cast<FlatAdamW*>(o.get()); };
  // auto: the fused kernel wherever LibTorch has it, the CPU included
  CATCH_CHECK(flat(make_adamw(*model, config))->uses_fused_kernel() == kHasFusedAdamW);
  config.kernel = OptimizerKernel::kFused;
  if (kHasFusedAdamW) {
    CATCH_CHECK(flat(make_adamw(*model, config))->uses_fused_kernel());
  } else {
    try {
      make_adamw(*model, config);
      CATCH_FAIL("kernel fused accepted by a LibTorch without the fused AdamW kernel");
    } catch (const ConfigError& e) {
      CATCH_CHECK(e.path() == "train.optimizer.kernel");
    }
  }
}

CATCH_TEST_CASE(
    "accumulate_gradients: a non-finite loss names the first bad sub-layer, and its replay leaves the "
    "generator where the step left it",
    "[unit][train]") {
  ModelConfig m = tiny_text_model();
  m.dropout = 0.1;  // the forward draws masks, so a replay that moved the generator would show
  const auto step = [&](const std::string& poison) {
    torch::manual_seed(5);
    Transformer model(m);
    model->train();
    const Batch batch = random_batch(2, 8, 8);
    std::optional<ActivationFault> fault;
    std::optional<ForwardHooks::Registration> poisoning;
    if (!poison.empty()) {
      fault.emplace(poison, m.n_layers, "activation:" + poison + "@1");
      poisoning.emplace(model->hooks(), *fault);
    }
    const StepGradients g = accumulate_gradients(model, {batch, batch}, TrainConfig{}, false);
    const at::Tensor after = at::detail::getDefaultCPUGenerator().get_state();
    return std::make_pair(g, after);
  };
  const auto [clean, clean_state] = step("");
  const auto [poisoned, poisoned_state] = step("blocks.1.attn");
  CATCH_CHECK(std::isfinite(clean.loss));
  CATCH_CHECK(clean.first_nonfinite_activation.empty());
  CATCH_CHECK_FALSE(std::isfinite(poisoned.loss));
  CATCH_CHECK(poisoned.first_nonfinite_activation == "blocks.1.attn (micro-batch 0)");
  // The replay is one mechanism: the generators as the step found them, restored; two micro-batches make
  // the replay of the first run before the second forward draws its masks.
  CATCH_CHECK(torch::equal(poisoned_state, clean_state));
}

CATCH_TEST_CASE(
    "kernel_for_run: auto is fused where LibTorch has the kernel, and a resumed run keeps the recorded one",
    "[unit][train]") {
  const c10::Device cpu(c10::kCPU), gpu(c10::kCUDA, 0);
  const OptimizerKernel fused_if_built =
      kHasFusedAdamW ? OptimizerKernel::kFused : OptimizerKernel::kSeparate;
  for (const OptimizerKernel explicit_kernel : {OptimizerKernel::kFused, OptimizerKernel::kSeparate}) {
    CATCH_CHECK(kernel_for_run(explicit_kernel, false, std::nullopt, cpu) == explicit_kernel);
    CATCH_CHECK(kernel_for_run(explicit_kernel, true, std::string("separate"), cpu) == explicit_kernel);
  }
  CATCH_CHECK(kernel_for_run(OptimizerKernel::kAuto, false, std::nullopt, cpu) == fused_if_built);
  CATCH_CHECK(kernel_for_run(OptimizerKernel::kAuto, true, std::string("separate"), cpu) ==
              OptimizerKernel::kSeparate);
  CATCH_CHECK(kernel_for_run(OptimizerKernel::kAuto, true, std::string("fused"), cpu) == fused_if_built);
  // Checkpoints from before the kernel was recorded: "auto" was fused on a GPU only.
  CATCH_CHECK(kernel_for_run(OptimizerKernel::kAuto, true, std::nullopt, cpu) == OptimizerKernel::kSeparate);
  CATCH_CHECK(kernel_for_run(OptimizerKernel::kAuto, true, std::nullopt, gpu) == fused_if_built);
}
