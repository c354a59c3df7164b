// The residual add fused with the norm (model/residual_norm.h): on the CPU, ATen's add then norm bit for
// bit; on the test device, the kernel's sum, norm and gradients against a float64 ATen composition within
// the float32 bounds of docs/numerics.md.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>

#include "core/runtime.h"
#include "model/norm.h"
#include "model/residual_norm.h"
#include "support/test_device.h"
#include "support/tolerance.h"

using namespace causal;
using testing::kEps32;
using testing::kEpsBf16;

namespace {

struct NormCase {
  NormKind kind;
  bool bias;
};

}  // namespace

CATCH_TEST_CASE("residual norm: on the CPU, add_then_forward is ATen's add then norm, bit for bit",
                "[unit][model]") {
  Norm norm(NormOptions(8));
  const torch::Tensor residual = torch::randn({3, 8}), delta = torch::randn({3, 8});
  CATCH_CHECK(!residual_norm_fusable(residual, delta, norm->named_parameters()["weight"],
                                     norm->named_parameters()["bias"]));
  const ResidualNormed got = norm->add_then_forward(residual, delta, /*fused=*/true, torch::kBFloat16);
  CATCH_CHECK(torch::equal(got.sum, residual + delta));
  CATCH_CHECK(torch::equal(got.normed, norm(residual + delta)));
  const ResidualNormed alone = norm->add_then_forward(residual, torch::Tensor(), true, c10::nullopt);
  CATCH_CHECK(alone.sum.is_same(residual));
  CATCH_CHECK(torch::equal(alone.normed, norm(residual)));
  CATCH_CHECK_THROWS_WITH(residual_norm(residual, delta, norm->named_parameters()["weight"],
                                        norm->named_parameters()["bias"], ResidualNormSpec{}),
                          Catch::Contains("[norm] the fused residual norm takes a float32 GPU residual"));
}

CATCH_TEST_CASE(
    "residual norm: on the test device, the kernel's sum, norm and gradients equal ATen's "
    "composition in float64 within float32 rounding",
    "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  CAUSAL_SKIP_UNLESS_CUDA_KERNELS();
  const c10::Device device = resolve_device(testing::test_device());
  torch::manual_seed(11);
  for (const int64_t dim : {100, 768, 4096})
    for (const NormCase norm_case : {NormCase{NormKind::kLayerNorm, true},
                                     NormCase{NormKind::kLayerNorm, false},
                                     {NormKind::kRmsNorm, false}})
      for (const c10::ScalarType delta_dtype : {torch::kFloat, torch::kBFloat16})
        for (const c10::ScalarType normed_dtype : {torch::kFloat, torch::kBFloat16}) {
          const bool rms = norm_case.kind == NormKind::kRmsNorm;
          CATCH_INFO("dim " << dim << (rms ? " rmsnorm" : " layernorm") << (norm_case.bias ? " bias" : "")
                            << " delta " << delta_dtype << " normed " << normed_dtype);
          const auto on_device = [&](const torch::Tensor& t) { return t.to(device).requires_grad_(true); };
          // A row mean far from zero, so a one-pass variance would show.
          const torch::Tensor residual = on_device(torch::randn({3, 41, dim}) + 4.0);
          const torch::Tensor delta = on_device(torch::randn({3, 41, dim}).to(delta_dtype));
          const torch::Tensor weight = on_device(torch::randn({dim}));
          const torch::Tensor bias = norm_case.bias ? on_device(torch::randn({dim})) : torch::Tensor();
          CATCH_REQUIRE(residual_norm_fusable(residual, delta, weight, bias));
          ResidualNormSpec spec;
          spec.rms = rms;
          spec.normed_dtype = normed_dtype;
          const torch::Tensor grad_sum = torch::randn({3, 41, dim}).to(device);
          const torch::Tensor grad_normed = torch::randn({3, 41, dim}).to(device).to(normed_dtype);

          const auto run = [&] {
            for (const torch::Tensor& t : {residual, delta, weight, bias})
              if (t.defined()) t.mutable_grad() = torch::Tensor();
            const ResidualNormed out = residual_norm(residual, delta, weight, bias, spec);
            CATCH_CHECK(out.normed.scalar_type() == normed_dtype);
            torch::autograd::backward({out.sum, out.normed}, {grad_sum, grad_normed});
            std::vector<torch::Tensor> all{out.sum.detach(), out.normed.detach(), residual.grad(),
                                           delta.grad(), weight.grad()};
            if (bias.defined()) all.push_back(bias.grad());
            return all;
          };
          const std::vector<torch::Tensor> got = run();
          const std::vector<torch::Tensor> again = run();
          for (size_t i = 0; i < got.size(); ++i) CATCH_CHECK(torch::equal(got[i], again[i]));  // bits repeat

          // The reference: ATen's add and norm in float64 on the same (widened) values.
          const auto wide = [](const torch::Tensor& t) {
            return t.detach().cpu().to(torch::kDouble).requires_grad_(true);
          };
          const torch::Tensor r64 = wide(residual), d64 = wide(delta), w64 = wide(weight);
          const torch::Tensor b64 = bias.defined() ? wide(bias) : torch::Tensor();
          const torch::Tensor s64 = r64 + d64;
          const torch::Tensor n64 = rms ? s64 * torch::rsqrt(s64.pow(2).mean(-1, true) + spec.eps) * w64
                                        : torch::layer_norm(s64, {dim}, w64, b64, spec.eps);
          torch::autograd::backward(
              {s64, n64}, {grad_sum.cpu().to(torch::kDouble), grad_normed.cpu().to(torch::kDouble)});

          // The sum is one float32 addition, as ATen's.
          CATCH_CHECK(torch::equal(got[0].cpu(), residual.detach().cpu() + delta.detach().cpu()));
          // Bounds (docs/numerics.md). x^ = (s - mean) rstd comes out of two reductions over the row (mean,
          // variance) whose terms reach |s| rstd: it is off by up to (2 dim + 4) eps of that. The norm adds
          // weight and bias; its input gradient two more row reductions of terms up to rstd |dy w| (1 + |x^|)
          // and the sum's own gradient; the weight's and the bias's gradients sum over the rows terms dy x^
          // and dy. A bfloat16 result may further round to either neighbour: one bfloat16 epsilon of it.
          const int64_t rows = 3 * 41;
          const std::vector<int64_t> kRowDims{0, 1};
          const auto eps = [](int64_t path) { return static_cast<double>(path) * kEps32; };
          const auto row_max = [](const torch::Tensor& t) { return t.detach().abs().amax(-1, true); };
          const auto rounded = [&](torch::Tensor allowed, const torch::Tensor& reference, bool bf16) {
            return bf16 ? allowed + reference.detach().abs() * kEpsBf16 : allowed;
          };
          const torch::Tensor s = s64.detach(), dy = grad_normed.cpu().to(torch::kDouble);
          const torch::Tensor rstd = rms ? torch::rsqrt(s.pow(2).mean(-1, true) + spec.eps)
                                         : torch::rsqrt(s.var(-1, /*unbiased=*/false, true) + spec.eps);
          const torch::Tensor xhat = rms ? s * rstd : (s - s.mean(-1, true)) * rstd;
          const torch::Tensor xhat_error = (row_max(s) * rstd + row_max(xhat)) * eps(2 * dim + 4);
          const torch::Tensor w = w64.detach().abs(),
                              b = b64.defined() ? b64.detach().abs() : torch::zeros_like(w);
          const bool bf16_normed = normed_dtype == torch::kBFloat16,
                     bf16_delta = delta_dtype == torch::kBFloat16;
          CATCH_CHECK(testing::within(got[1].cpu().to(torch::kDouble), n64.detach(),
                                      rounded(xhat_error * w + b * eps(2), n64, bf16_normed)));
          const torch::Tensor input_bound =
              (rstd * row_max(dy * w) * (1.0 + row_max(xhat)).pow(2) * (1.0 + xhat_error) +
               row_max(r64.grad())) *
              eps(4 * dim + 8);
          CATCH_CHECK(testing::within(got[2].cpu().to(torch::kDouble), r64.grad(), input_bound));
          CATCH_CHECK(testing::within(got[3].cpu().to(torch::kDouble), d64.grad(),
                                      rounded(input_bound, d64.grad(), bf16_delta)));
          const torch::Tensor weight_bound =
              (dy * xhat).abs().sum(kRowDims) * eps(rows) + (dy.abs() * xhat_error).sum(kRowDims);
          CATCH_CHECK(testing::within(got[4].cpu().to(torch::kDouble), w64.grad(), weight_bound));
          if (bias.defined())
            CATCH_CHECK(testing::within(got[5].cpu().to(torch::kDouble), b64.grad(),
                                        dy.abs().sum(kRowDims) * eps(rows)));
        }
  // Outside the kernel's reach: too wide a row, a bfloat16 residual, a CPU tensor.
  const torch::Tensor w = torch::ones({4097}, torch::TensorOptions().device(device));
  CATCH_CHECK(!residual_norm_fusable(torch::zeros({2, 4097}, w.options()),
                                     torch::zeros({2, 4097}, w.options()), w, torch::Tensor()));
  const torch::Tensor w8 = torch::ones({8}, w.options());
  CATCH_CHECK(!residual_norm_fusable(torch::zeros({2, 8}, w8.options().dtype(torch::kBFloat16)),
                                     torch::zeros({2, 8}, w8.options()), w8, torch::Tensor()));
  CATCH_CHECK(
      !residual_norm_fusable(torch::zeros({2, 8}), torch::zeros({2, 8}), torch::ones({8}), torch::Tensor()));
}
