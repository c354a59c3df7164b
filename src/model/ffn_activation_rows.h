// CUDA kernels for the feed-forward network's pointwise part (fused_hidden_projection.h): the first
// product's bias added and the GELU (exact or tanh) taken, or SwiGLU's silu(gate) * up, in one pass forward;
// backward one pass that recomputes the activation for the output weight's gradient, writes the inputs'
// gradients and each group of rows' share of the biases' gradients (summed afterwards in a fixed order, so
// that a run's bits repeat). ATen makes the bias add, the activation, its recomputation, its gradient and the
// bias's gradient in separate passes. Declared without LibTorch so that nvcc compiles the kernels alone.
#pragma once

#include <cstdint>

#include "model/kernel_args.h"

namespace causal {

enum class ActivationKind { kGelu, kGeluTanh, kSwiglu };

struct FfnActivationArgs {
  ActivationKind kind = ActivationKind::kGelu;
  KernelDtype dtype = KernelDtype::kFloat;  // of every (rows, width) tensor here, all contiguous
  int64_t rows = 0;
  int64_t width = 0;
  const void* first = nullptr;         // GELU's input, SwiGLU's gate: the product without its bias
  const void* second = nullptr;        // SwiGLU's up product without its bias; null for a GELU
  const float* first_bias = nullptr;   // (width) or null
  const float* second_bias = nullptr;  // (width) or null
  void* hidden = nullptr;              // forward's output; backward: the recomputed activation, or null
  // Backward only.
  const void* grad_hidden = nullptr;      // the gradient of hidden
  void* grad_first = nullptr;             // may be grad_hidden itself: each element is read before written
  void* grad_second = nullptr;            // SwiGLU
  float* first_bias_partials = nullptr;   // (groups, width) when first_bias is set
  float* second_bias_partials = nullptr;  // (groups, width) when second_bias is set
  int64_t rows_per_group = 1;             // rows_per_group(rows, kFfnActivationMaxGroups)
  void* stream = nullptr;                 // cudaStream_t
};

// At most this many backward groups, so that their partial sums stay small.
constexpr int64_t kFfnActivationMaxGroups = 256;

// Each returns the CUDA error code of its launch (0 for success).
int launch_ffn_activation_forward(const FfnActivationArgs& args);
int launch_ffn_activation_backward(const FfnActivationArgs& args);

}  // namespace causal
