// The products shaped for a GPU (model/gpu_products.h): on the CPU exactly at::linear, except q/k/v under
// autocast; on the test device (CAUSAL_TEST_DEVICE) and under the CPU's autocast the stacked q/k/v products
// give the separate products' values and gradients.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>

#include "core/runtime.h"
#include "model/autocast_scope.h"
#include "model/gpu_products.h"
#include "support/test_device.h"

using namespace causal;

namespace {

struct Inputs {
  torch::Tensor x, head_weight, head_bias;
  std::vector<torch::Tensor> weights, biases;  // q (8 rows), k and v (4 rows each)
};

Inputs make_inputs(const c10::Device& device, int64_t vocab) {
  torch::manual_seed(21);
  Inputs in;
  auto leaf = [&](std::vector<int64_t> shape) { return torch::randn(shape).to(device).requires_grad_(true); };
  in.x = leaf({2, 5, 8});
  in.head_weight = leaf({vocab, 8});
  in.head_bias = leaf({vocab});
  for (const int64_t rows : {8, 4, 4}) {
    in.weights.push_back(leaf({rows, 8}));
    in.biases.push_back(leaf({rows}));
  }
  return in;
}

// Every output summed with fixed random weights, so each gradient entry is checked, not only their sum.
torch::Tensor weighted_sum(const std::vector<torch::Tensor>& outputs) {
  torch::Tensor total = torch::zeros({}, outputs.front().options());
  int64_t seed = 0;
  for (const torch::Tensor& out : outputs) {
    const torch::Tensor w = at::randn(out.sizes(), at::make_generator<at::CPUGeneratorImpl>(++seed));
    total = total + (out * w.to(out.device())).sum();
  }
  return total;
}

}  // namespace

CATCH_TEST_CASE("gpu products: on the CPU the head and the q/k/v products are at::linear, bit for bit",
                "[unit][model]") {
  for (const int64_t vocab : {11, 64}) {
    const Inputs in = make_inputs(c10::kCPU, vocab);
    CATCH_CHECK(torch::equal(head_product(in.x, in.head_weight, in.head_bias),
                             at::linear(in.x, in.head_weight, in.head_bias)));
    CATCH_CHECK(
        torch::equal(head_product(in.x, in.head_weight, torch::Tensor()), at::linear(in.x, in.head_weight)));
  }
  const Inputs in = make_inputs(c10::kCPU, 11);
  const std::vector<torch::Tensor> qkv = qkv_products(in.x, in.weights, in.biases);
  CATCH_REQUIRE(qkv.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CATCH_CHECK(torch::equal(qkv[i], at::linear(in.x, in.weights[i], in.biases[i])));
}

CATCH_TEST_CASE(
    "gpu products: under the CPU's bf16 autocast q, k and v are one stacked product of x cast once, "
    "with the separate products' values and gradients to bf16 rounding",
    "[unit][model][autocast]") {
  const Inputs in = make_inputs(c10::kCPU, 11), ref = make_inputs(c10::kCPU, 11);
  std::vector<torch::Tensor> got, expected;
  {
    const AutocastScope scope(c10::DeviceType::CPU, c10::kBFloat16);
    got = qkv_products(in.x, in.weights, in.biases);
    for (size_t i = 0; i < 3; ++i) expected.push_back(at::linear(ref.x, ref.weights[i], ref.biases[i]));
  }
  for (size_t i = 0; i < 3; ++i) {
    CATCH_CHECK(got[i].scalar_type() == c10::kBFloat16);
    CATCH_CHECK(got[i].storage().is_alias_of(got[0].storage()));  // views of one product
    CATCH_CHECK(torch::allclose(got[i].to(torch::kFloat), expected[i].to(torch::kFloat), 1e-2, 1e-2));
  }
  weighted_sum(got).backward();
  weighted_sum(expected).backward();
  std::vector<std::pair<torch::Tensor, torch::Tensor>> grads{{in.x, ref.x}};
  for (size_t i = 0; i < 3; ++i) {
    grads.emplace_back(in.weights[i], ref.weights[i]);
    grads.emplace_back(in.biases[i], ref.biases[i]);
  }
  for (const auto& [g, r] : grads) {
    CATCH_CHECK(g.grad().scalar_type() == c10::kFloat);
    CATCH_CHECK(torch::allclose(g.grad(), r.grad(), 2e-2, 2e-2));
  }
}

CATCH_TEST_CASE(
    "gpu products: on the test device the padded head and the stacked q/k/v equal separate products",
    "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  for (const bool bias : {false, true}) {
    CATCH_INFO("bias " << bias);
    const Inputs cpu = make_inputs(c10::kCPU, 11), gpu = make_inputs(device, 11);
    auto b = [bias](const torch::Tensor& t) { return bias ? t : torch::Tensor(); };
    const torch::Tensor head = head_product(gpu.x, gpu.head_weight, b(gpu.head_bias));
    CATCH_CHECK(head.sizes() == torch::IntArrayRef({2, 5, 11}));
    const std::vector<torch::Tensor> qkv =
        qkv_products(gpu.x, gpu.weights, {b(gpu.biases[0]), b(gpu.biases[1]), b(gpu.biases[2])});
    std::vector<torch::Tensor> expected{at::linear(cpu.x, cpu.head_weight, b(cpu.head_bias))};
    for (size_t i = 0; i < 3; ++i) expected.push_back(at::linear(cpu.x, cpu.weights[i], b(cpu.biases[i])));
    std::vector<torch::Tensor> got{head, qkv[0], qkv[1], qkv[2]};
    for (size_t i = 0; i < got.size(); ++i)
      CATCH_CHECK(torch::allclose(got[i].cpu(), expected[i], /*rtol=*/1e-5, /*atol=*/1e-5));
    weighted_sum(expected).backward();
    weighted_sum(got).backward();
    std::vector<std::pair<torch::Tensor, torch::Tensor>> grads{{gpu.x, cpu.x},
                                                               {gpu.head_weight, cpu.head_weight}};
    for (size_t i = 0; i < 3; ++i) grads.emplace_back(gpu.weights[i], cpu.weights[i]);
    if (bias) {
      grads.emplace_back(gpu.head_bias, cpu.head_bias);
      for (size_t i = 0; i < 3; ++i) grads.emplace_back(gpu.biases[i], cpu.biases[i]);
    }
    for (const auto& [g, c] : grads) CATCH_CHECK(torch::allclose(g.grad().cpu(), c.grad(), 1e-5, 1e-5));
  }
}
