// The only place that knows whether a LibTorch version's softmax keeps a bfloat16 or half row in float.
#pragma once

#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/softmax.h>
#include <torch/version.h>

namespace causal {

#if TORCH_VERSION_MAJOR < 2
inline bool narrower_than_float(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}
#endif

// Softmax over the last dimension, accumulated in float whatever the scores' dtype, returned in that dtype.
// LibTorch 2.x's CPU and CUDA kernels read a bfloat16 or half row into float, sum there and round once: the
// same weights, bit for bit, as a float softmax cast back, without two casts of the scores and a float
// softmax backward over twice the bytes (docs/bench.md#bf16-softmax). 1.13's kernels are not relied on.
inline at::Tensor softmax_float_accumulated(const at::Tensor& scores) {
#if TORCH_VERSION_MAJOR >= 2
  return at::softmax(scores, -1);
#else
  if (!narrower_than_float(scores)) return at::softmax(scores, -1);
  return at::softmax(scores, -1, at::kFloat).to(scores.scalar_type());
#endif
}

// The gradient of softmax_float_accumulated's input from that of its weights (the same dtype), also summed
// in float.
inline at::Tensor softmax_float_accumulated_backward(const at::Tensor& grad, const at::Tensor& weights) {
#if TORCH_VERSION_MAJOR >= 2
  return at::_softmax_backward_data(grad, weights, -1, weights.scalar_type());
#else
  if (!narrower_than_float(weights))
    return at::_softmax_backward_data(grad, weights, -1, weights.scalar_type());
  return at::_softmax_backward_data(grad.to(at::kFloat), weights.to(at::kFloat), -1, at::kFloat)
      .to(weights.scalar_type());
#endif
}

}  // namespace causal
