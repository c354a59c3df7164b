// bf16 autocast (model.autocast): products in bfloat16, parameters, gradients and logits in float32, close
// to the float32 model, autocast off again after each forward, and no cast weight kept across forwards.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <vector>

#include "config/model_config.h"
#include "model/autocast_scope.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "support/tolerance.h"

using namespace causal;

namespace {

ModelConfig autocast_config(AttentionKind kernel, AutocastKind autocast) {
  ModelConfig c = testing::small_text_model(kernel, /*block=*/3);
  c.qk_norm = true;  // RMSNorm on bfloat16 q and k: each kernel must still get q, k and v in one dtype
  c.autocast = autocast;
  return c;
}

// Two packed documents per row and one padded key: every mask the kernels support.
ModelInputs packed_padded_inputs(int64_t batch, int64_t time) {
  ModelInputs in;
  in.tokens = torch::randint(0, 11, {batch, time}, torch::kLong);
  in.segment_ids = (torch::arange(time, torch::kLong) >= time / 2).to(torch::kLong).expand({batch, time});
  in.key_valid = torch::ones({batch, time}, torch::kBool);
  in.key_valid.select(1, time - 1).fill_(false);
  return in;
}

Transformer same_weights(const Transformer& source, const ModelConfig& c) {
  Transformer m(c);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < m->parameters().size(); ++i) m->parameters()[i].copy_(source->parameters()[i]);
  return m;
}

double gradient_cosine(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.flatten().dot(b.flatten()) / (a.norm() * b.norm())).item<double>();
}

}  // namespace

CATCH_TEST_CASE(
    "model: bf16 autocast runs the products in bfloat16 and keeps parameters, gradients and logits "
    "in float32, close to the float32 model",
    "[contract][model][autocast][numerics]") {
  for (const AttentionKind kernel :
       {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash}) {
    CATCH_INFO("kernel " << to_string(kernel));
    torch::manual_seed(3);
    Transformer full(autocast_config(kernel, AutocastKind::kOff));
    Transformer mixed = same_weights(full, autocast_config(kernel, AutocastKind::kBf16));
    const ModelInputs in = packed_padded_inputs(2, 8);
    const torch::Tensor expected = full->forward(in).logits;
    const torch::Tensor logits = mixed->forward(in).logits;
    CATCH_CHECK_FALSE(autocast_enabled(c10::DeviceType::CPU));  // only inside the forward
    CATCH_CHECK(logits.scalar_type() == torch::kFloat);
    CATCH_CHECK_FALSE(torch::equal(logits, expected));  // bfloat16 rounding shows: autocast was on
    // bfloat16 products along the way to each logit, at the scale of its row (tolerance.h (6)).
    const ModelConfig& c = full->config();
    CATCH_CHECK(testing::within(logits, expected,
                                testing::autocast_logits_rel(c) * expected.abs().amax(-1, /*keepdim=*/true),
                                "logits"));

    expected.pow(2).sum().backward();
    logits.pow(2).sum().backward();
    for (size_t i = 0; i < full->parameters().size(); ++i) {
      const torch::Tensor p = mixed->parameters()[i];
      CATCH_INFO("parameter " << i);
      CATCH_CHECK(p.scalar_type() == torch::kFloat);
      CATCH_REQUIRE(p.grad().defined());
      CATCH_CHECK(p.grad().scalar_type() == torch::kFloat);
      // cos >= bound, as |cos - 1| <= 1 - bound (a cosine is at most 1), so that the ratio is logged.
      CATCH_CHECK(testing::scalars_close(gradient_cosine(p.grad(), full->parameters()[i].grad()), 1.0,
                                         1.0 - testing::cosine_bound(testing::autocast_gradient_rel(c)),
                                         "gradient cosine"));
    }
  }
}

// Autocast caches each weight's bfloat16 copy while it is on; a cache kept past the forward would feed the
// next forward the weights from before the optimizer step.
CATCH_TEST_CASE("model: bf16 autocast casts the weights afresh in every forward",
                "[contract][model][autocast]") {
  const ModelConfig c = autocast_config(AttentionKind::kReference, AutocastKind::kBf16);
  torch::manual_seed(4);
  Transformer stepped(c);
  const ModelInputs in = packed_padded_inputs(2, 8);
  stepped->forward(in);
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : stepped->parameters()) p.add_(0.05);
  }
  Transformer fresh = same_weights(stepped, c);
  CATCH_CHECK(torch::equal(stepped->forward(in).logits, fresh->forward(in).logits));
}

// The model's layers reach LibTorch 1.13's cache only on some builds and devices; a product of a leaf
// weight reaches it on every one, so the scope's own duty is checked with that.
CATCH_TEST_CASE("model: an autocast scope drops the cast weights when the outermost scope ends",
                "[contract][model][autocast]") {
  const torch::Tensor weight = torch::randn({4, 4}).requires_grad_();
  const torch::Tensor x = torch::randn({2, 4});
  const auto product = [&] {
    const AutocastScope scope(c10::DeviceType::CPU, c10::kBFloat16);
    return torch::mm(x, weight);
  };
  product();
  {
    torch::NoGradGuard no_grad;
    weight.add_(1.0);
  }
  CATCH_CHECK(
      torch::equal(product(), torch::mm(x.to(torch::kBFloat16), weight.detach().to(torch::kBFloat16))));
}

CATCH_TEST_CASE("model: an autocast scope restores the state it found", "[unit][model][autocast]") {
  CATCH_REQUIRE_FALSE(autocast_enabled(c10::DeviceType::CPU));
  {
    const AutocastScope off(c10::DeviceType::CPU, c10::nullopt);
    CATCH_CHECK_FALSE(autocast_enabled(c10::DeviceType::CPU));
    const AutocastScope outer(c10::DeviceType::CPU, c10::kBFloat16);
    CATCH_CHECK(autocast_enabled(c10::DeviceType::CPU));
    {
      const AutocastScope inner(c10::DeviceType::CPU, c10::kBFloat16);
      CATCH_CHECK(torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type() == torch::kBFloat16);
    }
    CATCH_CHECK(autocast_enabled(c10::DeviceType::CPU));  // the inner scope leaves the outer one on
  }
  CATCH_CHECK_FALSE(autocast_enabled(c10::DeviceType::CPU));
  CATCH_CHECK(torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type() == torch::kFloat);
  CATCH_CHECK(products_dtype(AutocastKind::kOff) == c10::kFloat);
  CATCH_CHECK(products_dtype(AutocastKind::kBf16) == c10::kBFloat16);
}
