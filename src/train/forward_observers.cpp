// Training's observers of the forward pass (see forward_observers.h).
#include "train/forward_observers.h"

#include <torch/torch.h>

namespace causal {

bool is_traced_point(HookPoint point) {
  return point == HookPoint::kEmbed || point == HookPoint::kAttention || point == HookPoint::kFeedForward ||
         point == HookPoint::kFinalNorm || point == HookPoint::kLogits;
}

std::vector<HookSite> traced_sites(int64_t n_layers) {
  std::vector<HookSite> sites = {{HookPoint::kEmbed, -1}};
  for (int64_t i = 0; i < n_layers; ++i) {
    sites.push_back({HookPoint::kAttention, i});
    sites.push_back({HookPoint::kFeedForward, i});
  }
  sites.push_back({HookPoint::kFinalNorm, -1});
  sites.push_back({HookPoint::kLogits, -1});
  return sites;
}

at::Tensor SublayerTrace::observe(const HookSite& site, const at::Tensor& value) {
  outputs_.emplace_back(site, value);
  return value;
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
