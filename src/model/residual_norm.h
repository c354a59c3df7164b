// The residual add and the norm that reads its sum, as one operation: on a GPU of a CAUSAL_CUDA build, one
// kernel each way (residual_norm_rows.h) instead of ATen's add, norm, cast and gradient sum
// (docs/model.md#fused-residual-norm).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace causal {

struct ResidualNormed {
  at::Tensor sum;     // residual + delta: the residual stream after the branch
  at::Tensor normed;  // norm(sum)
};

struct ResidualNormSpec {
  bool rms = false;   // RMSNorm, else LayerNorm
  double eps = 1e-5;  // added to the variance / mean square
  c10::ScalarType normed_dtype =
      c10::kFloat;  // the dtype normed is written in (its products' under autocast)
};

// Whether residual_norm() takes these tensors: a CAUSAL_CUDA build, a float32 residual (..., D) on a GPU with
// D <= kResidualNormMaxDim, a delta of its shape in float32, bfloat16 or float16, float32 weight and bias.
bool residual_norm_fusable(const at::Tensor& residual, const at::Tensor& delta, const at::Tensor& weight,
                           const at::Tensor& bias);

// sum = residual + delta (delta widened to float32 first, as ATen's type promotion does) and normed = the
// norm of sum times weight (plus bias), with its gradients: residual's and delta's are the sum's own plus the
// norm's input gradient, each in its tensor's dtype. Needs residual_norm_fusable(); values match ATen's
// add then layer_norm (or the RMSNorm composition) to float32 rounding, and the bits repeat run to run.
ResidualNormed residual_norm(const at::Tensor& residual, const at::Tensor& delta, const at::Tensor& weight,
                             const at::Tensor& bias, const ResidualNormSpec& spec);

}  // namespace causal
