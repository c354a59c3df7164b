// Training's observers of the forward pass (see forward_observers.h).
#include "train/forward_observers.h"

#include <torch/torch.h>

namespace causal {

bool is_traced_point(HookPoint point) {
  return point == HookPoint::kEmbed || point == HookPoint::kAttention || point == HookPoint::kFeedForward ||
         point == HookPoint::kFinalNorm || point == HookPoint::kLogits;
}

at::Tensor SublayerTrace::observe(const HookSite& site, const at::Tensor& value) {
  outputs_.emplace_back(site, value);
  return value;
}

std::string SublayerTrace::first_nonfinite() const {
  torch::NoGradGuard no_grad;
  for (const auto& [site, output] : outputs_) {
    if (!torch::isfinite(output).all().item<bool>()) return site.name();
  }
  return "";
}

void ResidualStream::arm(bool armed) {
  armed_ = armed;
  blocks_.clear();
}

at::Tensor ResidualStream::observe(const HookSite& /*site*/, const at::Tensor& value) {
  if (armed_) blocks_.push_back(value.detach());
  return value;
}

std::vector<double> ResidualStream::rms() const {
  torch::NoGradGuard no_grad;
  std::vector<double> values;
  for (const at::Tensor& r : blocks_) values.push_back(r.pow(2).mean().sqrt().item<double>());
  return values;
}

}  // namespace causal
