// LoRA adapters (model/lora.h) against an independent reference: the plain model whose weights are the
// adapted ones folded in, W + scale B A. An adapter computes what that model computes (logits, both loss
// kernels) and gets the gradients the chain rule through it gives; the base is frozen and outside the
// optimizer; the adapter's parameters are named as checkpoints pin them.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <functional>
#include <map>

#include "config/config_io.h"
#include "config/cost_model.h"
#include "model/count_parameters.h"
#include "model/lora.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "support/training_steps.h"
#include "task/objective.h"
#include "train/optimizer.h"

using namespace causal;

namespace {

// Each FFN kind, tied and untied heads, biases on and off.
std::vector<ModelConfig> lora_models() {
  std::vector<ModelConfig> models;
  for (const FfnKind ffn : {FfnKind::kGelu, FfnKind::kSwiglu, FfnKind::kRelu}) {
    ModelConfig c = testing::small_text_model(AttentionKind::kSdpa, 8);
    c.ffn = ffn;
    c.tie_embeddings = ffn == FfnKind::kSwiglu;
    c.bias = ffn != FfnKind::kSwiglu;
    models.push_back(c);
  }
  return models;
}

LoraConfig every_product(const ModelConfig& c, int64_t rank) {
  LoraConfig lora;
  lora.rank = rank;
  lora.alpha = 6.0;
  lora.targets = {"q", "k", "v", "o", "up", "down"};
  if (c.ffn == FfnKind::kSwiglu) lora.targets.push_back("gate");
  if (!c.tie_embeddings) lora.targets.push_back("head");
  return lora;
}

// Every adapter's b made nonzero (it starts at zero, which would hide a wrong delta).
void perturb_adapters(Transformer& model) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  for (auto& item : model->named_parameters())
    if (is_adapter_parameter(item.key())) item.value().normal_(0.0, 0.3);
}

// W + scale b a of one product, from the adapter's own tensors.
torch::Tensor lora_folded(const torch::Tensor& w, const LoraImpl& lora) {
  return w + lora.b.mm(lora.a) * lora.scale();
}

// A plain model (no adapters) holding `adapted`'s weights with each adapter folded in by `fold` (LoRA's
// W + scale b a by default).
Transformer merged_copy(
    Transformer& adapted, const ModelConfig& c,
    const std::function<torch::Tensor(const torch::Tensor&, const LoraImpl&)>& fold = lora_folded) {
  Transformer plain(c);
  plain->to(adapted->head_weight().scalar_type());
  torch::NoGradGuard no_grad;
  auto target = plain->named_parameters();
  for (const auto& item : adapted->named_parameters())
    if (!is_adapter_parameter(item.key())) target[item.key()].copy_(item.value());
  auto source = adapted->named_parameters();
  for (const auto& [path, lora] : lora_adapters(*adapted))
    target[path + ".weight"].copy_(fold(source[path + ".weight"], *lora));
  return plain;
}

Batch one_batch() {
  torch::manual_seed(8);
  return testing::random_micro_batches(1, 3, c10::Device(c10::kCPU)).front();
}

}  // namespace

CATCH_TEST_CASE(
    "an attached adapter starts as the identity: b is zero (DoRA's magnitudes the base's row "
    "norms), the logits stay the base's bits",
    "[unit][lora]") {
  for (const ModelConfig& c : lora_models()) {
    for (const bool dora : {false, true}) {
      CATCH_INFO(to_string(c.ffn) << " dora " << dora);
      torch::manual_seed(1);
      Transformer model(c);
      model->eval();
      const Batch batch = one_batch();
      torch::NoGradGuard no_grad;
      const torch::Tensor before = model->forward(model_inputs(batch)).logits;
      LoraConfig lora = every_product(c, 4);
      lora.dora = dora;
      const std::vector<std::string> adapted = attach_lora(*model, lora);
      CATCH_CHECK(adapted.size() == static_cast<size_t>(c.n_layers) * (c.ffn == FfnKind::kSwiglu ? 7 : 6) +
                                        (c.tie_embeddings ? 0 : 1));
      if (dora) {
        reset_dora_magnitudes(*model);
        auto params = model->named_parameters();
        for (const auto& [path, adapter] : lora_adapters(*model)) {
          CATCH_REQUIRE(params.contains(path + ".lora.magnitude"));
          CATCH_CHECK(torch::allclose(adapter->magnitude, params[path + ".weight"].norm(2, {1})));
        }
      }
      CATCH_CHECK(torch::equal(model->forward(model_inputs(batch)).logits, before));
    }
  }
}

CATCH_TEST_CASE("LoRA's logits and losses equal the plain model with W + scale B A folded in",
                "[unit][lora]") {
  for (const ModelConfig& c : lora_models()) {
    for (const bool rslora : {false, true}) {
      CATCH_INFO(to_string(c.ffn) << (c.tie_embeddings ? " tied" : " untied") << " rslora " << rslora);
      torch::manual_seed(1);
      Transformer model(c);
      LoraConfig lora = every_product(c, 4);
      lora.rslora = rslora;
      attach_lora(*model, lora);
      perturb_adapters(model);
      Transformer plain = merged_copy(model, c);
      model->eval();
      plain->eval();
      const Batch batch = one_batch();
      torch::NoGradGuard no_grad;
      const torch::Tensor got = model->forward(model_inputs(batch)).logits;
      const torch::Tensor want = plain->forward(model_inputs(batch)).logits;
      // Far from the base: the adapters move the logits by much more than the tolerance.
      CATCH_CHECK((got - want).abs().max().item<double>() < 1e-4);
      CATCH_CHECK((got - want).abs().max().item<double>() * 100 <
                  (got - Transformer(c)->forward(model_inputs(batch)).logits).abs().max().item<double>());
      for (const LossKernel kernel : {LossKernel::kLogits, LossKernel::kChunked}) {
        TrainConfig train;
        train.loss_kernel = kernel;
        train.loss_chunk_rows = 16;
        const double a = training_loss_sum(model, batch, train, false).sum.item<double>();
        const double b = training_loss_sum(plain, batch, train, false).sum.item<double>();
        CATCH_CHECK(std::abs(a - b) < 1e-4 * std::abs(b));
      }
    }
  }
}

CATCH_TEST_CASE("only adapters train: frozen base, gradients by the chain rule, AdamW holds adapters alone",
                "[unit][lora]") {
  for (const ModelConfig& c : lora_models()) {
    for (const LossKernel kernel : {LossKernel::kLogits, LossKernel::kChunked}) {
      CATCH_INFO(to_string(c.ffn) << " kernel " << to_string(kernel));
      torch::manual_seed(1);
      Transformer model(c);
      const LoraConfig lora = every_product(c, 3);
      attach_lora(*model, lora);
      perturb_adapters(model);
      // In float64, where the two compositions' rounding lies far below any formula's error.
      model->to(torch::kDouble);
      Transformer plain = merged_copy(model, c);
      model->train();
      plain->train();
      const Batch batch = one_batch();
      TrainConfig train;
      train.loss_kernel = kernel;
      train.loss_chunk_rows = 16;
      training_loss_sum(model, batch, train, false).sum.backward();
      training_loss_sum(plain, batch, train, false).sum.backward();
      auto plain_params = plain->named_parameters();
      int64_t adapters = 0;
      for (const auto& item : model->named_parameters()) {
        const bool adapter = is_adapter_parameter(item.key());
        CATCH_CHECK(item.value().requires_grad() == adapter);
        CATCH_CHECK(item.value().grad().defined() == adapter);
        adapters += adapter;
      }
      // dL/dB = scale G A^T and dL/dA = scale B^T G, G the folded weight's gradient in the plain model.
      for (const auto& item : model->named_modules("", false)) {
        auto* product = dynamic_cast<LinearImpl*>(item.value().get());
        if (product == nullptr || product->adapter() == nullptr) continue;
        auto* adapter = dynamic_cast<LoraImpl*>(product->adapter());
        CATCH_REQUIRE(adapter != nullptr);
        const torch::Tensor g = plain_params[item.key() + ".weight"].grad();
        const double s = adapter->scale();
        const torch::Tensor want_b = s * g.mm(adapter->a.t()), want_a = s * adapter->b.t().mm(g);
        // Relative to the largest entry, against O(1) for a wrong scale or transpose.
        const auto relative_error = [](const torch::Tensor& got, const torch::Tensor& want) {
          return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
        };
        CATCH_INFO(item.key());
        CATCH_CHECK(relative_error(adapter->b.grad(), want_b) < 1e-10);
        CATCH_CHECK(relative_error(adapter->a.grad(), want_a) < 1e-10);
      }
      const auto optimizer = make_adamw(*model, OptimizerConfig{});
      int64_t stepped = 0;
      for (const auto& group : optimizer->param_groups())
        stepped += static_cast<int64_t>(group.params().size());
      CATCH_CHECK(stepped == adapters);
      int64_t adapter_elements = 0;
      for (const auto& item : trainable_parameters(*model)) adapter_elements += item.value().numel();
      CATCH_CHECK(count_parameters(*model, /*trainable_only=*/true) == adapter_elements);
      CATCH_CHECK(adapter_elements < count_parameters(*model) / 4);
    }
  }
}

CATCH_TEST_CASE("adapter parameters: names, shapes, init and scale as PEFT's LoRA", "[unit][lora]") {
  ModelConfig c = testing::small_llama_model(50);
  torch::manual_seed(1);
  Transformer model(c);
  LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 8.0;
  lora.targets = {"q", "down", "head"};
  attach_lora(*model, lora);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& item : trainable_parameters(*model)) shapes[item.key()] = item.value().sizes().vec();
  const std::map<std::string, std::vector<int64_t>> want = {{"blocks.0.attn.q_proj.lora.a", {4, 32}},
                                                            {"blocks.0.attn.q_proj.lora.b", {32, 4}},
                                                            {"blocks.1.attn.q_proj.lora.a", {4, 32}},
                                                            {"blocks.1.attn.q_proj.lora.b", {32, 4}},
                                                            {"blocks.0.ffn.down_proj.lora.a", {4, 64}},
                                                            {"blocks.0.ffn.down_proj.lora.b", {32, 4}},
                                                            {"blocks.1.ffn.down_proj.lora.a", {4, 64}},
                                                            {"blocks.1.ffn.down_proj.lora.b", {32, 4}},
                                                            {"head.lora.a", {4, 32}},
                                                            {"head.lora.b", {50, 4}}};
  CATCH_CHECK(shapes == want);
  const auto params = model->named_parameters();
  // kaiming_uniform(a = sqrt(5)) on (r, in): bound 1/sqrt(in); b zero.
  const torch::Tensor a = params["blocks.0.ffn.down_proj.lora.a"];
  CATCH_CHECK(a.abs().max().item<double>() <= 1.0 / std::sqrt(64.0));
  CATCH_CHECK(a.abs().max().item<double>() > 0.5 / std::sqrt(64.0));
  CATCH_CHECK(params["head.lora.b"].abs().max().item<double>() == 0.0);
  CATCH_CHECK(Lora(LoraOptions(8, 8, 4).alpha(8.0))->scale() == 2.0);
  CATCH_CHECK(Lora(LoraOptions(8, 8, 4).alpha(8.0).rslora(true))->scale() == 4.0);
  CATCH_CHECK(lora_target_of("blocks.3.ffn.fc_in") == "up");
  CATCH_CHECK(lora_target_of("blocks.3.attn_norm").empty());
}

CATCH_TEST_CASE("folded_parameters: the plain model's parameters, each adapted weight with its adapter in",
                "[unit][lora]") {
  const ModelConfig c = lora_models()[1];
  torch::manual_seed(1);
  Transformer model(c);
  attach_lora(*model, every_product(c, 2));
  perturb_adapters(model);
  Transformer plain = merged_copy(model, c);
  const std::map<std::string, torch::Tensor> folded = folded_parameters(*model);
  CATCH_REQUIRE(folded.size() == plain->named_parameters().size());
  for (const auto& item : plain->named_parameters())
    CATCH_CHECK(torch::allclose(folded.at(item.key()), item.value(), 1e-6, 1e-7));
}

CATCH_TEST_CASE("adapter dropout: live in train mode only, and the chunked loss then takes the logits path",
                "[unit][lora]") {
  ModelConfig c = testing::small_llama_model(11);
  torch::manual_seed(1);
  Transformer model(c);
  LoraConfig lora;
  lora.rank = 4;
  lora.dropout = 0.5;
  lora.targets = {"q", "head"};
  attach_lora(*model, lora);
  perturb_adapters(model);
  const Batch batch = one_batch();
  model->train();
  CATCH_CHECK(!model->head_adapter()->merges_exactly());
  TrainConfig logits, chunked;
  logits.loss_kernel = LossKernel::kLogits;
  chunked.loss_kernel = LossKernel::kChunked;
  chunked.loss_chunk_rows = 16;
  torch::manual_seed(5);
  const torch::Tensor a = training_loss_sum(model, batch, logits, false).sum;
  torch::manual_seed(5);
  const torch::Tensor b = training_loss_sum(model, batch, chunked, false).sum;
  CATCH_CHECK(torch::equal(a, b));  // the same path, the same dropout draws
  torch::manual_seed(6);
  CATCH_CHECK(!torch::equal(a, training_loss_sum(model, batch, logits, false).sum));
  model->eval();
  CATCH_CHECK(model->head_adapter()->merges_exactly());
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const torch::Tensor e1 = model->forward(model_inputs(batch)).logits;
  torch::manual_seed(6);
  CATCH_CHECK(torch::equal(e1, model->forward(model_inputs(batch)).logits));
}

// The cost model's LoRA figures (what `causal inspect` and the run's memory check print) count what
// attach_lora builds: the same adapters, and gradients and AdamW state for them alone. GQA and a GELU
// FFN named with "gate" (which it has not) included.
CATCH_TEST_CASE(
    "lora: the cost model counts the adapters attach_lora builds, and plans memory for them alone",
    "[unit][lora]") {
  std::vector<std::pair<ModelConfig, LoraConfig>> cases;
  for (const ModelConfig& c : lora_models()) cases.emplace_back(c, every_product(c, 3));
  ModelConfig gqa = testing::small_text_model(AttentionKind::kSdpa, 8);
  gqa.n_kv_heads = 2;
  gqa.ffn = FfnKind::kGelu;
  LoraConfig defaults;  // q, k, v, o, gate, up, down: "gate" adapts nothing in a GELU FFN
  defaults.rank = 5;
  cases.emplace_back(gqa, defaults);
  LoraConfig dora = every_product(lora_models()[0], 2);  // a magnitude per output row besides
  dora.dora = true;
  cases.emplace_back(lora_models()[0], dora);
  for (auto& [config, lora] : cases) {
    RunConfig run;
    run.model = config;
    resolve(run);
    torch::manual_seed(1);
    Transformer model(run.model);
    attach_lora(*model, lora);
    const int64_t built = count_parameters(*model, /*trainable_only=*/true);
    CATCH_CHECK(lora_parameters(run.model, lora) == built);
    const ModelCost cost = model_cost(run.model, 8, 2, 4, lora);
    const ModelCost full = model_cost(run.model, 8, 2, 4);
    CATCH_CHECK(cost.parameters.adapters == built);
    CATCH_CHECK(cost.parameters.trainable == built);
    CATCH_CHECK(cost.parameters.total == full.parameters.total);
    CATCH_CHECK(cost.memory.parameters == 4 * count_parameters(*model));
    CATCH_CHECK(cost.memory.gradients == 4 * built);
    CATCH_CHECK(cost.memory.optimizer == 8 * built);
    CATCH_CHECK(cost.memory.training < full.memory.training);
    CATCH_CHECK(cost.memory.activations > full.memory.activations);  // the adapters' rank-r intermediates
    CATCH_CHECK(cost.flops.training < full.flops.training);          // no gradient for frozen weights
    CATCH_CHECK(full.parameters.trainable == full.parameters.total);
  }
}

namespace {

// DoRA's adapters of `model` away from their start: a and b drawn, each magnitude its base's row norms
// (reset_dora_magnitudes) moved by about 20%.
void perturb_dora(Transformer& model) {
  perturb_adapters(model);
  reset_dora_magnitudes(*model);
  torch::NoGradGuard no_grad;
  for (const auto& [path, lora] : lora_adapters(*model))
    lora->magnitude.mul_(1 + 0.2 * torch::randn_like(lora->magnitude));
}

// (m / n) (W + s b a) of one product, n the row norms of W + s b a, from the tensors alone.
torch::Tensor dora_folded(const torch::Tensor& w, const LoraImpl& lora) {
  const torch::Tensor v = w + lora.b.mm(lora.a) * lora.scale();
  return (lora.magnitude / v.norm(2, {1})).unsqueeze(1) * v;
}

LoraConfig dora_config(const ModelConfig& c) {
  LoraConfig lora = every_product(c, 3);
  lora.dora = true;
  return lora;
}

}  // namespace

CATCH_TEST_CASE("DoRA: logits, losses and gradients of the plain model with (m / n)(W + s B A), n constant",
                "[unit][lora]") {
  for (const ModelConfig& c : lora_models()) {
    for (const LossKernel kernel : {LossKernel::kLogits, LossKernel::kChunked}) {
      CATCH_INFO(to_string(c.ffn) << (c.tie_embeddings ? " tied" : " untied") << " kernel "
                                  << to_string(kernel));
      torch::manual_seed(1);
      Transformer model(c);
      attach_lora(*model, dora_config(c));
      perturb_dora(model);
      // In float64, where the two compositions' rounding lies far below any formula's error.
      model->to(torch::kDouble);
      Transformer plain = merged_copy(model, c, dora_folded);
      const Batch batch = one_batch();
      {
        torch::NoGradGuard no_grad;
        model->eval();
        plain->eval();
        const torch::Tensor got = model->forward(model_inputs(batch)).logits;
        const torch::Tensor want = plain->forward(model_inputs(batch)).logits;
        CATCH_CHECK((got - want).abs().max().item<double>() < 1e-10);
        // Far from the base: the magnitudes and adapters move the logits.
        torch::manual_seed(1);
        Transformer base(c);
        base->to(torch::kDouble);
        base->eval();
        CATCH_CHECK((got - base->forward(model_inputs(batch)).logits).abs().max().item<double>() > 1e-2);
      }
      model->train();
      plain->train();
      TrainConfig train;
      train.loss_kernel = kernel;
      train.loss_chunk_rows = 16;
      const torch::Tensor loss = training_loss_sum(model, batch, train, false).sum;
      const torch::Tensor want_loss = training_loss_sum(plain, batch, train, false).sum;
      CATCH_CHECK(std::abs(loss.item<double>() - want_loss.item<double>()) <
                  1e-10 * std::abs(want_loss.item<double>()));
      loss.backward();
      want_loss.backward();
      auto plain_params = plain->named_parameters();
      auto params = model->named_parameters();
      const auto relative_error = [](const torch::Tensor& got, const torch::Tensor& want) {
        return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
      };
      // W' = diag(m / n) V, V = W + s B A, n constant: dL/dV = diag(m / n) G, G = dL/dW' of the plain
      // model; dL/dB = s dL/dV A^T, dL/dA = s B^T dL/dV, dL/dm = rowsum(G * V) / n.
      for (const auto& [path, lora] : lora_adapters(*model)) {
        CATCH_INFO(path);
        torch::NoGradGuard no_grad;
        const torch::Tensor g = plain_params[path + ".weight"].grad();
        const torch::Tensor v = params[path + ".weight"] + lora->b.mm(lora->a) * lora->scale();
        const torch::Tensor n = v.norm(2, {1});
        const torch::Tensor dv = (lora->magnitude / n).unsqueeze(1) * g;
        CATCH_CHECK(relative_error(lora->b.grad(), lora->scale() * dv.mm(lora->a.t())) < 1e-10);
        CATCH_CHECK(relative_error(lora->a.grad(), lora->scale() * lora->b.t().mm(dv)) < 1e-10);
        CATCH_CHECK(relative_error(lora->magnitude.grad(), (g * v).sum(1) / n) < 1e-10);
      }
    }
  }
}
