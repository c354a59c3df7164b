// The feed-forward network's activation and output projection with causal's CUDA kernels for the pointwise
// part (ffn_activation_rows.h): the input products' biases are added by the kernel, not by their products,
// so that backward finds their gradients in the same pass (docs/gpu.md#causals-own-kernels).
#pragma once

#include <ATen/core/Tensor.h>

#include "config/enums.h"

namespace causal {

// The products before the activation, without their biases: GELU's first, or SwiGLU's gate (first) and
// up (second), each (..., H) in the products' dtype; their biases (H) float32 or undefined.
struct HiddenInputs {
  at::Tensor first, first_bias;
  at::Tensor second, second_bias;  // SwiGLU only
};

// Whether fused_project_hidden() takes `first` for `kind`: a CAUSAL_CUDA build, a GELU or SwiGLU, a
// contiguous GPU tensor in float32, bfloat16 or float16 in the dtype its products run in.
bool hidden_projection_fusable(FfnKind kind, const at::Tensor& first);

// project_hidden() (hidden_projection.h) of first + first_bias (and second + second_bias): the biased
// pre-activations rounded to the products' dtype as the biased products would be, the activation, then
// linear(hidden, weight, bias). Forward keeps first and second, not the activation; backward recomputes it
// in the pass that makes first's and second's gradients and the biases'. Values match the plain composition
// to the rounding of the products' dtype; the bits repeat run to run.
at::Tensor fused_project_hidden(FfnKind kind, const HiddenInputs& inputs, const at::Tensor& weight,
                                const at::Tensor& bias);

}  // namespace causal
