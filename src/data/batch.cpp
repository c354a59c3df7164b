// Batch helpers.
#include "data/batch.h"

#include <ATen/ATen.h>

namespace causal {

int64_t Batch::valid_tokens() const { return labels.ne(kIgnoreLabel).sum().item<int64_t>(); }

Batch Batch::to(const c10::Device& device) const {
  auto move = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  return Batch{move(tokens), move(positions), move(segment_ids), move(key_valid), move(labels)};
}

}  // namespace causal
