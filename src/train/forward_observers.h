// What training watches inside the forward pass, as observers of the model's hook points
// (model/forward_hooks.h): the sub-layer trace that finds the first non-finite activation, and the residual
// stream's RMS per block. Activation faults are observers too (fault_injection.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "model/forward_hooks.h"

namespace causal {

// The sub-layers activation faults and the trace name: embed, blocks.<i>.attn, blocks.<i>.ffn, final_norm
// and logits.
bool is_traced_point(HookPoint point);
// Those sub-layers of a model with n_layers blocks, in forward order.
std::vector<HookSite> traced_sites(int64_t n_layers);

// Every traced sub-layer output of one forward, in forward order.
class SublayerTrace : public ForwardObserver {
 public:
  bool watches(HookPoint point) const override { return is_traced_point(point); }
  at::Tensor observe(const HookSite& site, const at::Tensor& value) override;
  const std::vector<std::pair<HookSite, at::Tensor>>& outputs() const { return outputs_; }

 private:
  std::vector<std::pair<HookSite, at::Tensor>> outputs_;
};

// The residual stream after each block of the forwards while armed (detached: read after backward).
class ResidualStream : public ForwardObserver {
 public:
  void arm(bool armed);  // arming forgets what an earlier forward left
  bool watches(HookPoint point) const override { return point == HookPoint::kBlock; }
  at::Tensor observe(const HookSite& site, const at::Tensor& value) override;
  // RMS of each block's output, in block order.
  std::vector<double> rms() const;

 private:
  bool armed_ = false;
  std::vector<at::Tensor> blocks_;
};

}  // namespace causal
