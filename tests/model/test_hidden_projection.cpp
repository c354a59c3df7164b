// The feed-forward output projection that recomputes its hidden activation in backward: the plain
// composition's output and gradients bit for bit, and the module's training forward really runs it.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <string>

#include "model/autocast_scope.h"
#include "model/feed_forward.h"
#include "model/hidden_projection.h"

using namespace causal;

namespace {

struct Gradients {
  torch::Tensor out, first, second, weight, bias;
};

// out = linear(hidden(first, second), weight, bias) and the gradients of a weighted sum of it, either
// through project_hidden or through the plain composition; under bf16 autocast, first and second reach
// the projection in bfloat16 as fc_in's output does.
Gradients run(bool recompute, FfnKind kind, bool autocast, bool with_bias) {
  torch::manual_seed(11);
  const int64_t hidden = 24, d = 8;
  torch::Tensor first = torch::randn({2, 5, hidden}).requires_grad_(true);
  torch::Tensor second = torch::randn({2, 5, hidden}).requires_grad_(true);
  torch::Tensor weight = torch::randn({d, hidden}).requires_grad_(true);
  torch::Tensor bias = with_bias ? torch::randn({d}).requires_grad_(true) : torch::Tensor();
  const torch::Tensor upstream = torch::randn({2, 5, d});
  torch::Tensor out;
  {
    const AutocastScope scope(c10::DeviceType::CPU,
                              autocast ? c10::optional<c10::ScalarType>(c10::kBFloat16) : c10::nullopt);
    const torch::Tensor a = autocast ? first.to(c10::kBFloat16) : first * 1;
    const torch::Tensor b = autocast ? second.to(c10::kBFloat16) : second * 1;
    if (recompute) {
      out = project_hidden(kind, a, kind == FfnKind::kSwiglu ? b : torch::Tensor(), weight, bias);
    } else {
      const torch::Tensor h = kind == FfnKind::kGelu       ? torch::gelu(a)
                              : kind == FfnKind::kGeluTanh ? torch::gelu(a, "tanh")
                                                           : torch::silu(a) * b;
      out = torch::linear(h, weight, bias);
    }
  }
  (out.to(torch::kFloat) * upstream).sum().backward();
  return {out, first.grad(), second.grad(), weight.grad(), with_bias ? bias.grad() : torch::Tensor()};
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && torch::equal(a, b);
}

}  // namespace

CATCH_TEST_CASE(
    "ffn: the recomputed hidden activation gives the plain composition's output and gradients bit for bit",
    "[unit][model][numerics]") {
  for (const FfnKind kind : {FfnKind::kGelu, FfnKind::kGeluTanh, FfnKind::kSwiglu}) {
    for (const bool autocast : {false, true}) {
      for (const bool with_bias : {false, true}) {
        CATCH_INFO(to_string(kind) << (autocast ? ", bf16 autocast" : ", float32")
                                   << (with_bias ? ", bias" : ", no bias"));
        const Gradients plain = run(false, kind, autocast, with_bias);
        const Gradients recomputed = run(true, kind, autocast, with_bias);
        CATCH_CHECK(recomputed.out.scalar_type() == (autocast ? c10::kBFloat16 : c10::kFloat));
        CATCH_CHECK(same_bits(recomputed.out, plain.out));
        CATCH_CHECK(same_bits(recomputed.first, plain.first));
        CATCH_CHECK(same_bits(recomputed.weight, plain.weight));
        CATCH_CHECK(recomputed.weight.scalar_type() == c10::kFloat);  // the parameter's, not the product's
        CATCH_CHECK(same_bits(recomputed.bias, plain.bias));
        if (kind == FfnKind::kSwiglu) CATCH_CHECK(same_bits(recomputed.second, plain.second));
      }
    }
  }
}

CATCH_TEST_CASE(
    "ffn: a training forward of the GELUs and swiglu recomputes the hidden activation, relu's does not",
    "[unit][model]") {
  for (const FfnKind kind : {FfnKind::kGelu, FfnKind::kGeluTanh, FfnKind::kSwiglu, FfnKind::kRelu}) {
    FeedForward ffn(FeedForwardOptions(8, 16).kind(kind));
    const torch::Tensor x = torch::randn({2, 3, 8});
    const std::string node = ffn->forward(x).grad_fn()->name();
    CATCH_INFO("grad_fn " << node);
    CATCH_CHECK((node.find("HiddenProjectionFunction") != std::string::npos) == (kind != FfnKind::kRelu));
    torch::NoGradGuard no_grad;
    CATCH_CHECK(ffn->forward(x).grad_fn() == nullptr);  // evaluation records nothing to recompute
  }
}
