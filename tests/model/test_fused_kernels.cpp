// model.kernels: causal's fused CUDA kernels against the ATen operations they replace. On the CPU "auto" is
// "aten" bit for bit; on the test device the whole model within the float32 bounds of docs/numerics.md, and
// the feed-forward activation's kernel (model/fused_hidden_projection.h) against a float64 composition.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>

#include "core/runtime.h"
#include "model/activation_math.h"
#include "model/autocast_scope.h"
#include "model/fused_hidden_projection.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "support/test_device.h"
#include "support/tolerance.h"

using namespace causal;
using testing::kEps32;
using testing::kEpsBf16;

namespace {

// The logits of one forward and every parameter's gradient after a backward.
std::vector<torch::Tensor> logits_and_gradients(const ModelConfig& c, const c10::Device& device) {
  torch::manual_seed(3);
  Transformer model(c);
  model->to(device);
  ModelInputs in;
  in.tokens = torch::randint(0, 11, {2, 16}, torch::kLong).to(device);
  const torch::Tensor logits = model->forward(in).logits;
  const torch::Tensor weights =
      torch::linspace(-1.0, 1.0, logits.numel(), logits.options()).view(logits.sizes());
  (logits * weights).sum().backward();
  std::vector<torch::Tensor> out{logits.detach().cpu()};
  for (const torch::Tensor& p : model->parameters()) out.push_back(p.grad().cpu());
  return out;
}

// Every norm and feed-forward kind the kernels fuse, and relu, which they leave to ATen.
std::vector<ModelConfig> kernel_models() {
  std::vector<ModelConfig> models;
  for (const NormKind norm : {NormKind::kLayerNorm, NormKind::kRmsNorm})
    for (const FfnKind ffn : {FfnKind::kGelu, FfnKind::kGeluTanh, FfnKind::kSwiglu, FfnKind::kRelu}) {
      ModelConfig c = testing::small_text_model(AttentionKind::kSdpa, 8);
      c.norm = norm;
      c.ffn = ffn;
      c.bias = norm == NormKind::kLayerNorm;
      models.push_back(c);
    }
  return models;
}

std::string describe(const ModelConfig& c) { return to_string(c.norm) + " " + to_string(c.ffn); }

}  // namespace

CATCH_TEST_CASE("fused kernels: on the CPU, model.kernels auto computes what aten does, bit for bit",
                "[unit][model]") {
  for (ModelConfig c : kernel_models()) {
    CATCH_INFO(describe(c));
    c.kernels = ModelKernels::kAten;
    const std::vector<torch::Tensor> aten = logits_and_gradients(c, c10::kCPU);
    c.kernels = ModelKernels::kAuto;
    const std::vector<torch::Tensor> fused = logits_and_gradients(c, c10::kCPU);
    CATCH_REQUIRE(aten.size() == fused.size());
    for (size_t i = 0; i < aten.size(); ++i) CATCH_CHECK(torch::equal(aten[i], fused[i]));
  }
  CATCH_CHECK(!hidden_projection_fusable(FfnKind::kGelu, torch::zeros({2, 4})));
  CATCH_CHECK_THROWS_WITH(fused_project_hidden(FfnKind::kGelu, HiddenInputs{torch::zeros({2, 4})},
                                               torch::zeros({3, 4}), torch::Tensor()),
                          Catch::Contains("[ffn] the fused activation takes"));
}

CATCH_TEST_CASE(
    "fused kernels: on the test device, model.kernels auto computes what aten does within float32 "
    "rounding, and in bf16 autocast within bfloat16's",
    "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  const c10::Device device = resolve_device(testing::test_device());
  for (ModelConfig c : kernel_models()) {
    for (const AutocastKind autocast : {AutocastKind::kOff, AutocastKind::kBf16}) {
      CATCH_INFO(describe(c) << " autocast " << to_string(autocast));
      c.autocast = autocast;
      c.kernels = ModelKernels::kAten;
      const std::vector<torch::Tensor> aten = logits_and_gradients(c, device);
      c.kernels = ModelKernels::kAuto;
      const std::vector<torch::Tensor> fused = logits_and_gradients(c, device);
      if (autocast == AutocastKind::kOff) {
        CATCH_CHECK(testing::within(fused[0], aten[0], testing::logits_bound(c, aten[0], 16, 16)));
        for (size_t i = 1; i < aten.size(); ++i)
          CATCH_CHECK(
              testing::within(fused[i], aten[i], testing::gradient_bound(c, aten[i], 16, 16, 16, 32)));
      } else {
        // Both round every product's inputs to bfloat16; where a float32 value lands on either side of a
        // bfloat16 rounding boundary, the two differ by one bfloat16 epsilon there (docs/numerics.md's bf16
        // tolerance for one model).
        for (size_t i = 0; i < aten.size(); ++i)
          CATCH_CHECK(testing::allclose(fused[i], aten[i], 2e-2 * aten[i].abs().max().item<double>(), 2e-2));
      }
    }
  }
}

CATCH_TEST_CASE(
    "fused kernels: on the test device, the feed-forward activation's kernel and its gradients "
    "equal a float64 composition within rounding",
    "[unit][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();
  CAUSAL_SKIP_UNLESS_CUDA_KERNELS();
  const c10::Device device = resolve_device(testing::test_device());
  torch::manual_seed(17);
  const int64_t rows = 300, width = 96, out = 40;  // 300 rows: more than one row per backward group
  const std::vector<int64_t> kRows{0};
  for (const FfnKind kind : {FfnKind::kGelu, FfnKind::kGeluTanh, FfnKind::kSwiglu})
    for (const bool biases : {true, false})
      for (const c10::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
        CATCH_INFO(to_string(kind) << (biases ? " biases " : " ") << dtype);
        const bool swiglu = kind == FfnKind::kSwiglu, bf16 = dtype == torch::kBFloat16;
        const auto leaf = [&](std::vector<int64_t> shape, c10::ScalarType t) {
          return (torch::randn(shape) * 2.0).to(t).to(device).requires_grad_(true);
        };
        HiddenInputs in;
        in.first = leaf({rows, width}, dtype);
        if (biases) in.first_bias = leaf({width}, torch::kFloat);
        if (swiglu) in.second = leaf({rows, width}, dtype);
        if (swiglu && biases) in.second_bias = leaf({width}, torch::kFloat);
        const torch::Tensor weight = leaf({out, width}, torch::kFloat);
        const torch::Tensor bias = biases ? leaf({out}, torch::kFloat) : torch::Tensor();
        const torch::Tensor upstream = torch::randn({rows, out}).to(device);
        CATCH_REQUIRE(hidden_projection_fusable(kind, in.first));

        const std::vector<torch::Tensor> inputs{in.first,       in.first_bias, in.second,
                                                in.second_bias, weight,        bias};
        const auto run = [&] {
          for (const torch::Tensor& t : inputs)
            if (t.defined()) t.mutable_grad() = torch::Tensor();
          const AutocastScope autocast(
              device.type(), bf16 ? c10::optional<c10::ScalarType>(torch::kBFloat16) : c10::nullopt);
          const torch::Tensor y = fused_project_hidden(kind, in, weight, bias);
          CATCH_CHECK(y.scalar_type() == dtype);
          y.backward(upstream.to(dtype));
          std::vector<torch::Tensor> all{y.detach().cpu()};
          for (const torch::Tensor& t : inputs)
            if (t.defined()) all.push_back(t.grad().cpu());
          return all;
        };
        const std::vector<torch::Tensor> got = run();
        const std::vector<torch::Tensor> again = run();
        for (size_t i = 0; i < got.size(); ++i) CATCH_CHECK(torch::equal(got[i], again[i]));  // bits repeat

        // The reference in float64, from the same values: the biased products rounded to the products' dtype
        // as the kernel rounds them, and under bf16 the output product's weight rounded as autocast does.
        const auto wide = [](const torch::Tensor& t) {
          return t.defined() ? t.detach().cpu().to(torch::kDouble).requires_grad_(true) : torch::Tensor();
        };
        const torch::Tensor f64 = wide(in.first), fb64 = wide(in.first_bias), s64 = wide(in.second),
                            sb64 = wide(in.second_bias), w64 = wide(weight), b64 = wide(bias);
        const auto biased = [&](const torch::Tensor& x, const torch::Tensor& b) {
          if (!b.defined()) return x;
          const torch::Tensor sum = x + b;  // rounded like the kernel's, its gradient passed straight through
          return sum + ((sum.detach().to(dtype).to(torch::kDouble)) - sum.detach());
        };
        const torch::Tensor pre = biased(f64, fb64);
        const torch::Tensor act = kind == FfnKind::kGelu       ? torch::gelu(pre)
                                  : kind == FfnKind::kGeluTanh ? torch::gelu(pre, "tanh")
                                                               : torch::silu(pre);
        const torch::Tensor hidden = swiglu ? act * biased(s64, sb64) : act;
        const torch::Tensor w_used =
            bf16 ? w64 + (w64.detach().to(dtype).to(torch::kDouble) - w64.detach()) : w64;
        const torch::Tensor b_used =
            b64.defined() && bf16 ? b64 + (b64.detach().to(dtype).to(torch::kDouble) - b64.detach()) : b64;
        const torch::Tensor y64 = torch::linear(hidden, w_used, b_used);
        const torch::Tensor dy = upstream.cpu().to(dtype).to(torch::kDouble);
        y64.backward(dy);

        // Bounds (docs/numerics.md): a product of n terms differs by n eps of its terms' magnitudes; each
        // activation, its slope and every rounding to the products' dtype add a few epsilons of the value
        // (8 float32 ones, and under bf16 three bfloat16 ones: the hidden, a gradient and the result).
        const double rounding = 8 * kEps32 + (bf16 ? 3 * kEpsBf16 : 0.0);
        const auto product = [&](const torch::Tensor& magnitude, int64_t n) {
          return magnitude * (static_cast<double>(n) * kEps32 + rounding);
        };
        const torch::Tensor h = hidden.detach().abs(), w = w_used.detach().abs();
        const torch::Tensor out_terms =
            h.mm(w.t()) + (b_used.defined() ? b_used.detach().abs() : torch::zeros({out}, h.options()));
        CATCH_CHECK(testing::within(got[0].to(torch::kDouble), y64.detach(), product(out_terms, width + 1)));
        // The hidden gradient dy W, then through the activation's slope (at most 1.2 for these) and for
        // SwiGLU the other factor.
        const torch::Tensor hidden_terms = dy.abs().mm(w);
        const torch::Tensor up = swiglu ? biased(s64, sb64).detach().abs() : torch::ones_like(h);
        const torch::Tensor first_bound = product(hidden_terms * 1.2 * up, out) + f64.grad().abs() * rounding;
        size_t next = 1;
        CATCH_CHECK(testing::within(got[next++].to(torch::kDouble), f64.grad(), first_bound));
        if (biases) {
          const torch::Tensor bias_bound =
              first_bound.sum(kRows) + f64.grad().abs().sum(kRows) * (rows * kEps32);
          CATCH_CHECK(testing::within(got[next++].to(torch::kDouble), fb64.grad(), bias_bound));
        }
        if (swiglu) {
          const torch::Tensor second_bound =
              product(hidden_terms * act.detach().abs(), out) + s64.grad().abs() * rounding;
          CATCH_CHECK(testing::within(got[next++].to(torch::kDouble), s64.grad(), second_bound));
          if (biases) {
            const torch::Tensor bias_bound =
                second_bound.sum(kRows) + s64.grad().abs().sum(kRows) * (rows * kEps32);
            CATCH_CHECK(testing::within(got[next++].to(torch::kDouble), sb64.grad(), bias_bound));
          }
        }
        CATCH_CHECK(
            testing::within(got[next++].to(torch::kDouble), w64.grad(), product(dy.abs().t().mm(h), rows)));
        if (biases)
          CATCH_CHECK(testing::within(got[next++].to(torch::kDouble), b64.grad(),
                                      dy.abs().sum(kRows) * (rows * kEps32)));
      }
}

CATCH_TEST_CASE(
    "fused kernels: the feed-forward kernel's activations and slopes are ATen's gelu, gelu tanh and "
    "silu with their backward, to float32 rounding",
    "[unit][model]") {
  // Every x from -12 to 12 in steps of 1/64, then a few far out.
  std::vector<float> xs;
  for (int i = -768; i <= 768; ++i) xs.push_back(static_cast<float>(i) / 64.0f);
  for (const float far : {-1000.0f, -100.0f, -30.0f, 30.0f, 100.0f, 1000.0f}) xs.push_back(far);
  const torch::Tensor x = torch::tensor(xs);
  const torch::Tensor ones = torch::ones_like(x);
  struct Case {
    const char* name;
    activation_math::ValueAndSlope (*kernel)(float);
    torch::Tensor value, slope;
  };
  const std::vector<Case> cases{
      {"gelu", activation_math::gelu_exact, torch::gelu(x), at::gelu_backward(ones, x)},
      {"gelu tanh", activation_math::gelu_tanh, torch::gelu(x, "tanh"), at::gelu_backward(ones, x, "tanh")},
      {"silu", activation_math::silu, torch::silu(x), torch::silu_backward(ones, x)}};
  for (const Case& c : cases) {
    CATCH_INFO(c.name);
    std::vector<float> values, slopes;
    for (const float v : xs) {
      const activation_math::ValueAndSlope got = c.kernel(v);
      values.push_back(got.value);
      slopes.push_back(got.slope);
    }
    // A few float32 epsilons of the result, and of |x| where 1 + erf or 1 + tanh cancel for x far below 0:
    // there both lose the same bits, each with its own erf or tanh.
    const torch::Tensor allowed_value = (c.value.abs() * 8 + x.abs() * 4).to(torch::kDouble) * kEps32;
    const torch::Tensor allowed_slope = (c.slope.abs() * 8 + (x.abs() + 1) * 4).to(torch::kDouble) * kEps32;
    CATCH_CHECK(
        testing::within(torch::tensor(values).to(torch::kDouble), c.value.to(torch::kDouble), allowed_value));
    CATCH_CHECK(
        testing::within(torch::tensor(slopes).to(torch::kDouble), c.slope.to(torch::kDouble), allowed_slope));
  }
}
