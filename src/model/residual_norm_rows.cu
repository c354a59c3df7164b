// The residual add fused with the norm (residual_norm_rows.h). A thread keeps to the same columns of every
// row it sees, so the shared row and the shared gradient sums need no synchronisation of their own.
#include <type_traits>

#include "model/kernel_math.cuh"
#include "model/residual_norm_rows.h"

namespace causal {
namespace {

using kernel_math::block_sum;
using kernel_math::load;
using kernel_math::store;

constexpr int kThreads = 256;

template <class Delta, class Normed>
__global__ void residual_norm_forward_kernel(const float* residual, const Delta* delta, float* sum,
                                             Normed* normed, const float* weight, const float* bias,
                                             float* mean_out, float* rstd_out, int64_t dim, float eps,
                                             bool rms) {
  extern __shared__ float row[];  // (dim) this row's sum
  __shared__ float scratch[kThreads / 32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float total = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += kThreads) {
    const float v = residual[base + j] + load(delta + base + j);
    sum[base + j] = v;
    row[j] = v;
    total += v;
  }
  // Two passes over the row, as ATen's composition: a one-pass mean square would lose the variance of a
  // row far from zero to cancellation.
  const float mean = rms ? 0.0f : block_sum<kThreads>(total, scratch) / static_cast<float>(dim);
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += kThreads) {
    const float centred = row[j] - mean;
    squares += centred * centred;
  }
  const float rstd = rsqrtf(block_sum<kThreads>(squares, scratch) / static_cast<float>(dim) + eps);
  for (int64_t j = threadIdx.x; j < dim; j += kThreads) {
    float y = (row[j] - mean) * rstd * weight[j];
    if (bias != nullptr) y += bias[j];
    store(normed + base + j, y);
  }
  if (threadIdx.x == 0) {
    if (mean_out != nullptr) mean_out[blockIdx.x] = mean;
    rstd_out[blockIdx.x] = rstd;
  }
}

// x^ = (s - mean) * rstd, g = dy * weight: ds = rstd * (g - mean(g) - x^ mean(g x^)) + the sum's own
// gradient; RMSNorm drops mean(g). The weight's gradient is sum(dy x^) over rows, the bias's sum(dy).
template <class Normed, class Delta>
__global__ void residual_norm_backward_kernel(const float* sum, const Normed* grad_normed,
                                              const float* grad_sum, const float* weight,
                                              const float* mean_in, const float* rstd_in,
                                              float* grad_residual, Delta* grad_delta, float* weight_partials,
                                              float* bias_partials, int64_t rows, int64_t dim,
                                              int64_t rows_per_group, bool rms) {
  extern __shared__ float column_sums[];  // (2, dim): the group's dy x^ and dy per column
  __shared__ float scratch[kThreads / 32];
  float* weight_sum = column_sums;
  float* bias_sum = column_sums + dim;
  for (int64_t j = threadIdx.x; j < dim; j += kThreads) weight_sum[j] = bias_sum[j] = 0.0f;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_group;
  const int64_t last = first + rows_per_group < rows ? first + rows_per_group : rows;
  const float inv_dim = 1.0f / static_cast<float>(dim);
  for (int64_t r = first; r < last; ++r) {
    const int64_t base = r * dim;
    const float mean = rms ? 0.0f : mean_in[r];
    const float rstd = rstd_in[r];
    float g_xhat = 0.0f, g_total = 0.0f;
    for (int64_t j = threadIdx.x; j < dim; j += kThreads) {
      const float xhat = (sum[base + j] - mean) * rstd;
      const float dy = load(grad_normed + base + j);
      const float g = dy * weight[j];
      g_xhat += g * xhat;
      g_total += g;
      weight_sum[j] += dy * xhat;
      bias_sum[j] += dy;
    }
    const float mean_g_xhat = block_sum<kThreads>(g_xhat, scratch) * inv_dim;
    const float mean_g = rms ? 0.0f : block_sum<kThreads>(g_total, scratch) * inv_dim;
    for (int64_t j = threadIdx.x; j < dim; j += kThreads) {
      const float xhat = (sum[base + j] - mean) * rstd;
      const float g = load(grad_normed + base + j) * weight[j];
      float ds = rstd * (g - mean_g - xhat * mean_g_xhat);
      if (grad_sum != nullptr) ds += grad_sum[base + j];
      grad_residual[base + j] = ds;
      if (grad_delta != nullptr) store(grad_delta + base + j, ds);
    }
  }
  for (int64_t j = threadIdx.x; j < dim; j += kThreads) {
    weight_partials[blockIdx.x * dim + j] = weight_sum[j];
    if (bias_partials != nullptr) bias_partials[blockIdx.x * dim + j] = bias_sum[j];
  }
}

}  // namespace

int launch_residual_norm_forward(const ResidualNormForwardArgs& a) {
  if (a.rows == 0) return 0;
  if (a.dim <= 0 || a.dim > kResidualNormMaxDim) return static_cast<int>(cudaErrorInvalidValue);
  const size_t shared = static_cast<size_t>(a.dim) * sizeof(float);
  const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  kernel_math::with_element_type(a.delta_dtype, [&](auto* delta_type) {
    using Delta = std::remove_pointer_t<decltype(delta_type)>;
    kernel_math::with_element_type(a.normed_dtype, [&](auto* normed_type) {
      using Normed = std::remove_pointer_t<decltype(normed_type)>;
      residual_norm_forward_kernel<Delta, Normed>
          <<<static_cast<unsigned>(a.rows), kThreads, shared, stream>>>(
              a.residual, static_cast<const Delta*>(a.delta), a.sum, static_cast<Normed*>(a.normed), a.weight,
              a.bias, a.mean, a.rstd, a.dim, a.eps, a.rms);
    });
  });
  return static_cast<int>(cudaGetLastError());
}

int launch_residual_norm_backward(const ResidualNormBackwardArgs& a) {
  if (a.rows == 0) return 0;
  if (a.dim <= 0 || a.dim > kResidualNormMaxDim || a.rows_per_group < 1)
    return static_cast<int>(cudaErrorInvalidValue);
  const int64_t groups = group_count(a.rows, a.rows_per_group);
  const size_t shared = 2 * static_cast<size_t>(a.dim) * sizeof(float);
  const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  kernel_math::with_element_type(a.normed_dtype, [&](auto* normed_type) {
    using Normed = std::remove_pointer_t<decltype(normed_type)>;
    kernel_math::with_element_type(a.delta_dtype, [&](auto* delta_type) {
      using Delta = std::remove_pointer_t<decltype(delta_type)>;
      residual_norm_backward_kernel<Normed, Delta>
          <<<static_cast<unsigned>(groups), kThreads, shared, stream>>>(
              a.sum, static_cast<const Normed*>(a.grad_normed), a.grad_sum, a.weight, a.mean, a.rstd,
              a.grad_residual, static_cast<Delta*>(a.grad_delta), a.weight_partials, a.bias_partials, a.rows,
              a.dim, a.rows_per_group, a.rms);
    });
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace causal
