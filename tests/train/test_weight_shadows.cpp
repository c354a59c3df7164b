// model.weight_shadows (model/weight_shadow.h): under bf16 autocast a model that keeps its product weights as
// shadows computes what one that casts them every forward does, bit for bit: the loss by either loss kernel,
// every gradient, the eval logits, and training steps with either AdamW kernel, whose updates the shadows
// must follow. On the test device, graph-replayed steps with shadows equal eager steps without.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>

#include "core/optim_compat.h"
#include "core/runtime.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "support/test_device.h"
#include "support/training_steps.h"
#include "task/objective.h"

using namespace causal;

namespace {

// Each feed-forward kind, tied and untied heads, with and without biases (qkv_bias alone: Qwen2's layout).
std::vector<ModelConfig> shadow_models() {
  std::vector<ModelConfig> models;
  for (const FfnKind ffn : {FfnKind::kGelu, FfnKind::kGeluTanh, FfnKind::kSwiglu, FfnKind::kRelu}) {
    ModelConfig c = testing::small_text_model(AttentionKind::kSdpa, 8);
    c.ffn = ffn;
    c.autocast = AutocastKind::kBf16;
    c.tie_embeddings = ffn == FfnKind::kGelu || ffn == FfnKind::kSwiglu;
    c.bias = ffn != FfnKind::kSwiglu;
    c.qkv_bias = ffn == FfnKind::kSwiglu;
    models.push_back(c);
  }
  return models;
}

// The loss by `kernel`, every parameter's gradient, and the eval logits of the same batch.
std::vector<torch::Tensor> loss_gradients_logits(const ModelConfig& c, LossKernel kernel) {
  torch::manual_seed(7);
  Transformer model(c);
  model->train();
  torch::manual_seed(8);
  const Batch batch = testing::random_micro_batches(1, 2, c10::Device(c10::kCPU)).front();
  TrainConfig train;
  train.loss_kernel = kernel;
  train.loss_chunk_rows = 8;  // several chunks
  const torch::Tensor sum = training_loss_sum(model, batch, train, /*max_abs_logit=*/false).sum;
  sum.backward();
  std::vector<torch::Tensor> out{sum.detach()};
  for (const torch::Tensor& p : model->parameters()) out.push_back(p.grad());
  model->eval();
  torch::NoGradGuard no_grad;
  out.push_back(model->forward(model_inputs(batch)).logits);
  return out;
}

std::string describe(const ModelConfig& c) {
  return to_string(c.ffn) + (c.tie_embeddings ? " tied" : " untied") + (c.bias ? " bias" : " qkv_bias");
}

}  // namespace

CATCH_TEST_CASE(
    "weight shadows: under bf16 autocast, the loss, gradients and logits are those without shadows, bit for "
    "bit",
    "[unit][model]") {
  for (ModelConfig c : shadow_models()) {
    for (const LossKernel kernel : {LossKernel::kLogits, LossKernel::kChunked}) {
      CATCH_INFO(describe(c) << " loss_kernel " << to_string(kernel));
      c.weight_shadows = WeightShadows::kOff;
      const std::vector<torch::Tensor> cast = loss_gradients_logits(c, kernel);
      c.weight_shadows = WeightShadows::kOn;
      const std::vector<torch::Tensor> shadowed = loss_gradients_logits(c, kernel);
      CATCH_REQUIRE(cast.size() == shadowed.size());
      for (size_t i = 0; i < cast.size(); ++i) CATCH_CHECK(torch::equal(cast[i], shadowed[i]));
    }
  }
}

CATCH_TEST_CASE(
    "weight shadows: training steps with shadows are the steps without, bit for bit, with either AdamW "
    "kernel",
    "[unit][train]") {
  const c10::Device cpu(c10::kCPU);
  std::vector<OptimizerKernel> kernels{OptimizerKernel::kSeparate};
  if (kHasFusedAdamW) kernels.push_back(OptimizerKernel::kFused);
  for (ModelConfig c : shadow_models()) {
    for (const OptimizerKernel kernel : kernels) {
      CATCH_INFO(describe(c) << " optimizer " << to_string(kernel));
      TrainConfig train;
      train.optimizer.kernel = kernel;
      c.weight_shadows = WeightShadows::kOff;
      const testing::TrainedSteps cast = testing::train_random_steps(c, train, cpu, 4, nullptr);
      c.weight_shadows = WeightShadows::kOn;
      const testing::TrainedSteps shadowed = testing::train_random_steps(c, train, cpu, 4, nullptr);
      CATCH_CHECK(cast.losses == shadowed.losses);
      for (size_t i = 0; i < cast.weights.size(); ++i)
        CATCH_CHECK(torch::equal(cast.weights[i], shadowed.weights[i]));
    }
  }
}

CATCH_TEST_CASE(
    "weight shadows: on the test device, graph-replayed steps with shadows equal eager steps without, bit "
    "for "
    "bit",
    "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  if (!StepGraph::available(device)) CAUSAL_SKIP_TEST("built without CAUSAL_CUDA: no CUDA graphs");
  for (ModelConfig c : shadow_models()) {
    CATCH_INFO(describe(c));
    c.weight_shadows = WeightShadows::kAuto;
    StepGraph graph;
    const testing::TrainedSteps shadowed = testing::train_random_steps(c, TrainConfig{}, device, 6, &graph);
    CATCH_INFO("capture failure: " << graph.disabled_reason());
    CATCH_REQUIRE(graph.disabled_reason().empty());
    CATCH_CHECK(graph.replays() >= 6);
    c.weight_shadows = WeightShadows::kOff;
    const testing::TrainedSteps cast = testing::train_random_steps(c, TrainConfig{}, device, 6, nullptr);
    CATCH_CHECK(cast.losses == shadowed.losses);
    for (size_t i = 0; i < cast.weights.size(); ++i)
      CATCH_CHECK(torch::equal(cast.weights[i], shadowed.weights[i]));
  }
}
