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
    if (!pinned || !t.is_cpu()) return t.to(device);
    // Pinning copies into a buffer of the tensor's own layout, which LibTorch 2.x refuses for one whose
    // elements share memory (an expanded row of positions): such a tensor goes over compacted.
    const at::Tensor host = t.is_non_overlapping_and_dense() ? t : t.contiguous();
    return host.pin_memory().to(device, /*non_blocking=*/true);
  };
  Batch moved{move(tokens), move(positions), move(segment_ids), move(key_valid), move(labels)};
  // Checked here, on the host: on a GPU the model could only find out with a synchronisation.
  moved.unpadded = unpadded || (key_valid.defined() && key_valid.is_cpu() && key_valid.all().item<bool>());
  return moved;
}

}  // namespace causal
