// Batch helpers.
#include "data/batch.h"

#include <ATen/ATen.h>

namespace causal {

int64_t Batch::valid_tokens() const { return labels.ne(kIgnoreLabel).sum().item<int64_t>(); }

Batch Batch::to(const c10::Device& device) const {
  // To a GPU through pinned host memory, so the copy runs asynchronously on the current stream and the
  // host goes on preparing the next step (stream order keeps it before the kernels that read it).
  const bool pinned = device.is_cuda();
  auto move = [&](const at::Tensor& t) {
    if (!t.defined()) return t;
    return pinned && t.is_cpu() ? t.pin_memory().to(device, /*non_blocking=*/true) : t.to(device);
  };
  return Batch{move(tokens), move(positions), move(segment_ids), move(key_valid), move(labels)};
}

}  // namespace causal
