// Normalisation layers (see norm.h).
#include "model/norm.h"

#include <torch/torch.h>

namespace causal {

NormImpl::NormImpl(const NormOptions& options) : options_(options) {
  TORCH_CHECK(options_.dim() > 0, "[norm] expected dim > 0, got ", options_.dim());
  weight_ = register_parameter("weight", torch::ones({options_.dim()}));
  if (options_.kind() == NormKind::kLayerNorm && options_.bias()) {
    bias_ = register_parameter("bias", torch::zeros({options_.dim()}));
  }
}

void NormImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  weight_.fill_(1.0);
  if (bias_.defined()) bias_.zero_();
}

torch::Tensor NormImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.dim(), "[norm] expected last dim ", options_.dim(),
              ", got ", x.sizes());
  if (options_.kind() == NormKind::kLayerNorm) {
    return torch::layer_norm(x, {options_.dim()}, weight_, bias_, options_.eps());
  }
  // Half/bfloat16 mean squares lose too much precision; normalise and scale in float32 and cast back, so
  // that under autocast q and k leave qk_norm in the dtype v has.
  const bool reduced = x.scalar_type() == torch::kHalf || x.scalar_type() == torch::kBFloat16;
  const torch::Tensor xf = reduced ? x.to(torch::kFloat) : x;
  const torch::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + options_.eps());
  const torch::Tensor scaled = normed * weight_;
  return reduced ? scaled.to(x.scalar_type()) : scaled;
}

ResidualNormed NormImpl::add_then_forward(const torch::Tensor& residual, const torch::Tensor& delta,
                                          bool fused, c10::optional<c10::ScalarType> normed_dtype) {
  if (!delta.defined()) return {residual, forward(residual)};
  if (fused && residual_norm_fusable(residual, delta, weight_, bias_)) {
    ResidualNormSpec spec;
    spec.rms = options_.kind() == NormKind::kRmsNorm;
    spec.eps = options_.eps();
    spec.normed_dtype = normed_dtype.value_or(torch::kFloat);
    return residual_norm(residual, delta, weight_, bias_, spec);
  }
  const torch::Tensor sum = residual + delta;
  return {sum, forward(sum)};
}

}  // namespace causal
