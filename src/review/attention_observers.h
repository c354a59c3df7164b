// What evaluation watches inside the forward pass, as observers of the model's hook points
// (model/forward_hooks.h): each layer's attention weights, and one head's output removed.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "model/forward_hooks.h"

namespace causal {

// Each layer's softmax weights (B,Hq,T,Tk) of the forwards it watches, in layer order. Watching them runs
// the reference kernel.
class AttentionWeights : public ForwardObserver {
 public:
  bool watches(HookPoint point) const override { return point == HookPoint::kAttentionWeights; }
  at::Tensor observe(const HookSite& site, const at::Tensor& value) override;
  const std::vector<at::Tensor>& layers() const { return layers_; }

 private:
  std::vector<at::Tensor> layers_;
};

// Zeroes one query head's output before o_proj (the head ablation probe).
class HeadAblation : public ForwardObserver {
 public:
  // layer in [0, n_layers), head in [0, n_heads) of the model it is registered on.
  HeadAblation(int64_t layer, int64_t head) : layer_(layer), head_(head) {}
  bool watches(HookPoint point) const override { return point == HookPoint::kHeads; }
  at::Tensor observe(const HookSite& site, const at::Tensor& value) override;

 private:
  int64_t layer_, head_;
};

}  // namespace causal
