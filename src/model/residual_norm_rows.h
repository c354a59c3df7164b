// CUDA kernels for the residual add fused with the norm that reads its sum (residual_norm.h). Forward, one
// pass over a row: sum = residual + delta, written once, and norm(sum) in the dtype its products want.
// Backward, one block per group of rows: the norm's input gradient plus the gradient the sum already has,
// written in the residual's and the delta's dtypes, and each group's share of the weight's and the bias's
// gradients (summed afterwards in a fixed order, so that a run's bits repeat). The ATen composition makes
// the add, the norm, the cast and the gradients' sum in separate float32 passes. Declared without LibTorch
// so that nvcc compiles the kernels alone.
#pragma once

#include <cstdint>

#include "model/kernel_args.h"

namespace causal {

// The widest row the kernels take: their shared memory holds one float32 row forward, two backward.
constexpr int64_t kResidualNormMaxDim = 4096;

struct ResidualNormForwardArgs {
  const float* residual = nullptr;  // (rows, dim), contiguous, as every (rows, dim) tensor here
  const void* delta = nullptr;      // (rows, dim) in delta_dtype
  KernelDtype delta_dtype = KernelDtype::kFloat;
  float* sum = nullptr;    // (rows, dim): residual + delta (delta widened to float32 first)
  void* normed = nullptr;  // (rows, dim) in normed_dtype
  KernelDtype normed_dtype = KernelDtype::kFloat;
  const float* weight = nullptr;  // (dim)
  const float* bias = nullptr;    // (dim), or null
  float* mean = nullptr;          // (rows) LayerNorm's mean; null for RMSNorm
  float* rstd = nullptr;          // (rows) 1 / sqrt(variance + eps), RMSNorm: 1 / sqrt(mean square + eps)
  int64_t rows = 0;
  int64_t dim = 0;
  float eps = 1e-5f;
  bool rms = false;        // RMSNorm: no centring, no bias
  void* stream = nullptr;  // cudaStream_t
};

struct ResidualNormBackwardArgs {
  const float* sum = nullptr;         // (rows, dim) saved from forward
  const void* grad_normed = nullptr;  // (rows, dim) in normed_dtype
  KernelDtype normed_dtype = KernelDtype::kFloat;
  const float* grad_sum = nullptr;  // (rows, dim) the gradient the sum has from later layers, or null
  const float* weight = nullptr;    // (dim)
  const float* mean = nullptr;      // (rows), null for RMSNorm
  const float* rstd = nullptr;      // (rows)
  float* grad_residual = nullptr;   // (rows, dim)
  void* grad_delta = nullptr;       // (rows, dim) in delta_dtype, or null when grad_residual serves both
  KernelDtype delta_dtype = KernelDtype::kFloat;
  float* weight_partials = nullptr;  // (groups, dim): each group's share of the weight's gradient
  float* bias_partials = nullptr;    // (groups, dim), or null without a bias
  int64_t rows = 0;
  int64_t dim = 0;
  int64_t rows_per_group = 1;  // rows of one block: rows_per_group(rows, kResidualNormMaxGroups)
  bool rms = false;
  void* stream = nullptr;
};

// At most this many backward groups, so that their partial sums stay small.
constexpr int64_t kResidualNormMaxGroups = 1024;

// Each returns the CUDA error code of its launch (0 for success).
int launch_residual_norm_forward(const ResidualNormForwardArgs& args);
int launch_residual_norm_backward(const ResidualNormBackwardArgs& args);

}  // namespace causal
