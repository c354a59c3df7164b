// Packing and unpacking of gradient buckets.
#include "dist/gradient_buckets.h"

#include <ATen/ATen.h>

namespace causal {

GradientBuckets::GradientBuckets(std::vector<at::Tensor> gradients, int64_t bucket_bytes)
    : gradients_(std::move(gradients)) {
  std::vector<std::vector<at::Tensor>> groups;
  int64_t filled = 0;    // bytes in the current bucket
  int64_t elements = 0;  // values in the current bucket: the next gradient's offset
  for (const at::Tensor& g : gradients_) {
    const int64_t bytes = g.numel() * static_cast<int64_t>(g.element_size());
    // Tensors of another dtype start a bucket of their own: a bucket is one flat tensor.
    const bool same_dtype = !groups.empty() && groups.back().front().scalar_type() == g.scalar_type();
    if (groups.empty() || !same_dtype || filled + bytes > bucket_bytes) {
      groups.emplace_back();
      filled = 0;
      elements = 0;
    }
    slots_.push_back({groups.size() - 1, elements});
    groups.back().push_back(g.reshape({-1}));
    filled += bytes;
    elements += g.numel();
  }
  for (const auto& group : groups) buckets_.push_back(group.size() == 1 ? group[0].clone() : at::cat(group));
}

void GradientBuckets::unpack() {
  for (size_t i = 0; i < gradients_.size(); ++i) {
    at::Tensor& g = gradients_[i];
    const at::Tensor flat = buckets_[slots_[i].bucket].narrow(0, slots_[i].offset, g.numel());
    g.copy_(flat.view(g.sizes()));
  }
}

}  // namespace causal
