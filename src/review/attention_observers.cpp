// Evaluation's observers of the forward pass (see attention_observers.h).
#include "review/attention_observers.h"

#include <ATen/ATen.h>

namespace causal {

at::Tensor AttentionWeights::observe(const HookSite& /*site*/, const at::Tensor& value) {
  layers_.push_back(value);
  return value;
}

at::Tensor HeadAblation::observe(const HookSite& site, const at::Tensor& value) {
  if (site.layer != layer_) return value;  // (B,Hq,T,dk)
  const int64_t heads = value.size(1);
  TORCH_CHECK(head_ >= 0 && head_ < heads, "[probes] ablated head ", head_, " out of range [0,", heads, ")");
  at::Tensor keep = at::ones({heads}, value.options());
  keep[head_] = 0;
  return value * keep.view({1, heads, 1, 1});
}

}  // namespace causal
