// The chunked head and loss (model/head_loss.h) against the logits path it replaces: cross-entropy (sum) of
// the whole linear(hidden, weight, bias), values and gradients, on the CPU and on the test device; and the
// CUDA row kernel against the ATen composition.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <limits>

#include "core/runtime.h"
#include "model/head_loss.h"
#include "support/test_device.h"
#include "support/tolerance.h"

using namespace causal;

namespace {

constexpr int64_t kIgnore = -100;

struct HeadInputs {
  torch::Tensor hidden, weight, bias, labels;
};

// 37 rows of width 16 over a vocabulary of 50; every fifth label is outside the loss.
HeadInputs head_inputs(const c10::Device& device, int64_t vocab = 50) {
  torch::manual_seed(5);
  HeadInputs in;
  auto leaf = [&](std::vector<int64_t> shape) { return torch::randn(shape).to(device).requires_grad_(true); };
  in.hidden = leaf({37, 16});
  in.weight = leaf({vocab, 16});
  in.bias = leaf({vocab});
  torch::Tensor labels = torch::randint(vocab, {37}, torch::kLong);
  labels.index_put_({torch::arange(0, 37, 5)}, kIgnore);
  in.labels = labels.to(device);
  return in;
}

HeadInputs copy_of(const HeadInputs& in) {
  auto leaf = [](const torch::Tensor& t) { return t.detach().clone().requires_grad_(true); };
  return {leaf(in.hidden), leaf(in.weight), leaf(in.bias), in.labels};
}

// The logits path: the whole logits in `products`, cast to float32, then cross-entropy (sum).
torch::Tensor logits_path(const HeadInputs& in, bool bias, c10::ScalarType products) {
  const torch::Tensor b = bias ? in.bias.to(products) : torch::Tensor();
  const torch::Tensor logits =
      at::linear(in.hidden.to(products), in.weight.to(products), b).to(torch::kFloat);
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits, in.labels,
                          F::CrossEntropyFuncOptions().ignore_index(kIgnore).reduction(torch::kSum));
}

HeadLossOptions options_for(int64_t chunk_rows, c10::ScalarType products) {
  HeadLossOptions options;
  options.chunk_rows = chunk_rows;
  options.products = products;
  options.ignore_label = kIgnore;
  options.max_abs_logit = true;
  return options;
}

// Loss, max |logit| and every gradient of the chunked loss against the logits path, to `rtol`/`atol`.
void check_against_logits_path(const HeadInputs& inputs, bool bias, int64_t chunk_rows,
                               c10::ScalarType products, double rtol, double atol) {
  CATCH_INFO("bias " << bias << ", chunk rows " << chunk_rows << ", products " << products);
  const HeadInputs chunked = copy_of(inputs), plain = copy_of(inputs);
  const HeadLoss got =
      chunked_head_loss(chunked.hidden, chunked.weight, bias ? chunked.bias : torch::Tensor(), chunked.labels,
                        options_for(chunk_rows, products));
  const torch::Tensor expected = logits_path(plain, bias, products);
  CATCH_CHECK(got.sum.scalar_type() == torch::kFloat);
  CATCH_CHECK(torch::allclose(got.sum.cpu(), expected.detach().cpu(), rtol, atol));
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor b = bias ? plain.bias.to(products) : torch::Tensor();
    const torch::Tensor max_abs =
        at::linear(plain.hidden.to(products), plain.weight.to(products), b).to(torch::kFloat).abs().max();
    CATCH_CHECK(torch::allclose(got.max_abs_logit.cpu(), max_abs.cpu(), rtol, atol));
  }
  // A scale other than 1, as the trainer's division by the step's token count gives.
  (got.sum * 0.25).backward();
  (expected * 0.25).backward();
  CATCH_CHECK(torch::allclose(chunked.hidden.grad().cpu(), plain.hidden.grad().cpu(), rtol, atol));
  CATCH_CHECK(torch::allclose(chunked.weight.grad().cpu(), plain.weight.grad().cpu(), rtol, atol));
  CATCH_CHECK(chunked.weight.grad().scalar_type() == torch::kFloat);
  if (bias) CATCH_CHECK(torch::allclose(chunked.bias.grad().cpu(), plain.bias.grad().cpu(), rtol, atol));
  if (!bias) CATCH_CHECK(!chunked.bias.grad().defined());
}

// On `device`, in `products`: no row in the loss gives 0, never NaN, and zero gradients; a NaN in one row's
// hidden state reaches the loss and max |logit|, as it would through the logits; so does one NaN column
// among finite ones (a thread of the CUDA row kernel may see only it).
void check_edge_cases(const c10::Device& device, c10::ScalarType products) {
  CATCH_INFO("device " << device << ", products " << products);
  HeadInputs none = copy_of(head_inputs(device));
  none.labels = torch::full({37}, kIgnore, torch::TensorOptions().dtype(torch::kLong).device(device));
  const HeadLoss empty =
      chunked_head_loss(none.hidden, none.weight, none.bias, none.labels, options_for(8, products));
  CATCH_CHECK(empty.sum.item<float>() == 0.0f);
  empty.sum.backward();
  CATCH_CHECK(none.hidden.grad().abs().max().item<float>() == 0.0f);
  CATCH_CHECK(none.weight.grad().abs().max().item<float>() == 0.0f);

  HeadInputs bad = copy_of(head_inputs(device)), column = copy_of(head_inputs(device));
  {
    torch::NoGradGuard no_grad;
    bad.hidden[3][2] = std::numeric_limits<float>::quiet_NaN();
    column.weight[7][0] = std::numeric_limits<float>::quiet_NaN();
  }
  const HeadLoss nan =
      chunked_head_loss(bad.hidden, bad.weight, bad.bias, bad.labels, options_for(8, products));
  CATCH_CHECK(std::isnan(nan.sum.item<float>()));
  CATCH_CHECK(std::isnan(nan.max_abs_logit.item<float>()));
  const HeadLoss nan_column =
      chunked_head_loss(column.hidden, column.weight, column.bias, column.labels, options_for(8, products));
  CATCH_CHECK(std::isnan(nan_column.sum.item<float>()));
}

}  // namespace

CATCH_TEST_CASE(
    "head loss: chunk by chunk, the loss, max |logit| and every gradient are the whole logits' cross-entropy",
    "[unit][model]") {
  const HeadInputs inputs = head_inputs(c10::kCPU);
  // One row per chunk, chunks that do not divide the rows, exactly the rows, more than the rows.
  for (const int64_t chunk_rows : {1, 7, 37, 64})
    for (const bool bias : {true, false})
      check_against_logits_path(inputs, bias, chunk_rows, torch::kFloat, 1e-5, 1e-5);
  // In bfloat16 products, as under autocast: the same per-element logits, so bf16 rounding of the
  // gradient products is the only difference.
  for (const int64_t chunk_rows : {8, 37})
    check_against_logits_path(inputs, true, chunk_rows, torch::kBFloat16, 2e-2, 2e-2);
}

CATCH_TEST_CASE("head loss: without gradients, rows all outside the loss, and a non-finite hidden state",
                "[unit][model]") {
  const HeadInputs inputs = head_inputs(c10::kCPU);
  const HeadLoss with_grad = chunked_head_loss(inputs.hidden, inputs.weight, inputs.bias, inputs.labels,
                                               options_for(8, torch::kFloat));
  CATCH_CHECK(with_grad.sum.requires_grad());
  {
    torch::NoGradGuard no_grad;
    const HeadLoss without = chunked_head_loss(inputs.hidden, inputs.weight, inputs.bias, inputs.labels,
                                               options_for(8, torch::kFloat));
    CATCH_CHECK(!without.sum.requires_grad());
    CATCH_CHECK(torch::equal(without.sum, with_grad.sum.detach()));
    CATCH_CHECK(torch::equal(without.max_abs_logit, with_grad.max_abs_logit.detach()));
  }

  check_edge_cases(c10::kCPU, torch::kFloat);
}

CATCH_TEST_CASE("head loss: chunk rows for a byte budget are a multiple of 64, at least 64",
                "[unit][model]") {
  CATCH_CHECK(head_loss_chunk_rows(50257, int64_t{256} << 20) == 1280);  // GPT-2: 1,335 rows fit
  CATCH_CHECK(head_loss_chunk_rows(256, int64_t{256} << 20) == 262144);
  CATCH_CHECK(head_loss_chunk_rows(50257, 1) == 64);
}

CATCH_TEST_CASE(
    "head loss: on the test device, the padded chunked loss and its gradients equal the CPU's logits path",
    "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  // 50 rows of vocabulary pad to 64 on a GPU; 64 do not.
  for (const int64_t vocab : {50, 64}) {
    CATCH_INFO("vocab " << vocab);
    const HeadInputs cpu = head_inputs(c10::kCPU, vocab), gpu = head_inputs(device, vocab);
    for (const c10::ScalarType products : {torch::kFloat, torch::kBFloat16}) {
      const bool bf16 = products == torch::kBFloat16;
      const double tol = bf16 ? 2e-2 : 1e-4;  // float32 on a GPU may run its products in TF32
      const HeadInputs got_in = copy_of(gpu), expected_in = copy_of(cpu);
      const HeadLoss got = chunked_head_loss(got_in.hidden, got_in.weight, got_in.bias, got_in.labels,
                                             options_for(8, products));
      const torch::Tensor expected = logits_path(expected_in, true, products);
      CATCH_CHECK(torch::allclose(got.sum.cpu(), expected.detach(), tol, tol));
      got.sum.backward();
      expected.backward();
      CATCH_CHECK(torch::allclose(got_in.hidden.grad().cpu(), expected_in.hidden.grad(), tol, tol));
      CATCH_CHECK(torch::allclose(got_in.weight.grad().cpu(), expected_in.weight.grad(), tol, tol));
      CATCH_CHECK(torch::allclose(got_in.bias.grad().cpu(), expected_in.bias.grad(), tol, tol));
    }
  }
  check_edge_cases(device, torch::kBFloat16);
}
