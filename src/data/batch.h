// One micro-batch as the data layer hands it to training and evaluation (plain tensors, no model types).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace causal {

// Label value that never contributes to the loss (matches cross_entropy's default ignore_index).
constexpr int64_t kIgnoreLabel = -100;

struct Batch {
  at::Tensor tokens;       // (B,T,F) int64: one id per input field
  at::Tensor positions;    // (B,T) int64: RoPE/learned positions (restart per document when packed)
  at::Tensor segment_ids;  // (B,T) int64 or undefined: attention stays within a segment
  at::Tensor key_valid;    // (B,T) bool or undefined: false = padding, never attended to
  at::Tensor labels;       // (B,T) int64: next-token / answer ids, kIgnoreLabel where there is no loss
  bool unpadded = false;   // key_valid is all true, as to() found on the host (before any copy to a GPU)

  int64_t valid_tokens() const;  // positions that count in the loss
  Batch to(const c10::Device& device) const;
};

}  // namespace causal
