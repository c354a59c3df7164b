// The CUDA paths, on the device CAUSAL_TEST_DEVICE names: the model equals the CPU's, bf16 autocast runs
// there, batches arrive by asynchronous copies, and the device's generator state round-trips through a
// checkpoint. On the CPU each test is reported skipped: it would compare the CPU with itself.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>

#include "checkpoint/checkpoint.h"
#include "core/optim_compat.h"
#include "core/runtime.h"
#include "data/batch.h"
#include "model/autocast_scope.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "support/test_device.h"
#include "train/flat_adamw.h"

using namespace causal;

CATCH_TEST_CASE("device: forward and backward on the test device equal the CPU's", "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  for (const AttentionKind kernel :
       {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash}) {
    CATCH_INFO("kernel " << to_string(kernel));
    torch::manual_seed(5);
    Transformer cpu(testing::small_text_model(kernel, 3));
    Transformer gpu(testing::small_text_model(kernel, 3));
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < cpu->parameters().size(); ++i) gpu->parameters()[i].copy_(cpu->parameters()[i]);
    }
    gpu->to(device);
    ModelInputs in;
    in.tokens = torch::randint(0, 11, {2, 16}, torch::kLong);
    const torch::Tensor expected = cpu->forward(in).logits;
    ModelInputs moved = in;
    moved.tokens = in.tokens.to(device);
    const torch::Tensor logits = gpu->forward(moved).logits;
    expected.sum().backward();
    logits.sum().backward();
    // float32 on both sides (TF32 is off for matmuls by default): a few ulps of the largest logit apart.
    const double scale = expected.abs().max().item<double>();
    CATCH_CHECK((logits.cpu() - expected).abs().max().item<double>() <= 1e-5 * scale);
    for (size_t i = 0; i < cpu->parameters().size(); ++i) {
      const torch::Tensor g = cpu->parameters()[i].grad();
      const double tolerance = 1e-4 * g.abs().max().item<double>() + 1e-7;
      CATCH_CHECK((gpu->parameters()[i].grad().cpu() - g).abs().max().item<double>() <= tolerance);
    }
  }
}

CATCH_TEST_CASE("device: AdamW on the test device (the fused kernel by default) steps as the CPU's AdamW",
                "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  torch::manual_seed(9);
  std::vector<torch::Tensor> cpu, gpu;
  for (const int64_t n : {5, 300, 70000}) {  // a small one, and one past FlatAdamW's flat limit
    cpu.push_back(torch::randn({n}).requires_grad_(true));
    gpu.push_back(cpu.back().detach().to(device).requires_grad_(true));
  }
  const auto options = torch::optim::AdamWOptions(0.01).betas(std::make_tuple(0.9, 0.95)).weight_decay(0.1);
  torch::optim::AdamW reference(cpu, options);
  FlatAdamW adamw(gpu, options);
  adamw.set_kernel(OptimizerKernel::kAuto);
  CATCH_CHECK(adamw.uses_fused_kernel() == kHasFusedAdamW);
  for (int step = 0; step < 6; ++step) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      cpu[i].mutable_grad() = torch::randn_like(cpu[i]);
      gpu[i].mutable_grad() = cpu[i].grad().to(device);
    }
    reference.step();
    adamw.step();
  }
  for (size_t i = 0; i < cpu.size(); ++i)
    CATCH_CHECK(torch::allclose(gpu[i].cpu(), cpu[i], /*rtol=*/1e-5, /*atol=*/1e-6));
}

CATCH_TEST_CASE("device: bf16 autocast on the test device runs the products in bfloat16", "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  const torch::Tensor a = torch::randn({8, 8}, torch::TensorOptions(device));
  AutocastScope scope(device.type(), autocast_dtype(AutocastKind::kBf16));
  CATCH_CHECK(autocast_enabled(device.type()));
  CATCH_CHECK(torch::mm(a, a).scalar_type() == torch::kBFloat16);
}

CATCH_TEST_CASE("device: batches reach the test device unchanged through pinned asynchronous copies",
                "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  Batch batch{torch::randint(0, 9, {4, 16, 1}, torch::kLong), torch::arange(16).expand({4, 16}),
              torch::Tensor(), torch::ones({4, 16}, torch::kBool),
              torch::randint(0, 9, {4, 16}, torch::kLong)};
  const Batch moved = batch.to(device);
  // "cuda" names the current GPU; the tensors say which one it was ("cuda:0").
  CATCH_CHECK(moved.tokens.device().type() == device.type());
  CATCH_CHECK(moved.unpadded);  // key_valid all true, checked on the host before the copy
  CATCH_CHECK(!moved.segment_ids.defined());
  // Reading them back waits on the stream the copies were queued on.
  CATCH_CHECK(torch::equal(moved.tokens.cpu(), batch.tokens));
  CATCH_CHECK(torch::equal(moved.labels.cpu(), batch.labels));
  CATCH_CHECK(torch::equal(moved.key_valid.cpu(), batch.key_valid));
}

CATCH_TEST_CASE("device: a checkpoint's generator states make the test device draw the same numbers again",
                "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  torch::manual_seed(11);
  const nlohmann::json saved = capture_global_rng(device);
  const torch::Tensor first = torch::rand({64}, torch::TensorOptions(device));
  torch::rand({1000}, torch::TensorOptions(device));  // moves the generator on
  restore_global_rng(saved, device);
  CATCH_CHECK(torch::equal(torch::rand({64}, torch::TensorOptions(device)).cpu(), first.cpu()));
}
