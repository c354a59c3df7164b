// The feed-forward network's pointwise kernels (ffn_activation_rows.h): the activations and their slopes of
// activation_math.h, in float32 whatever the element type.
#include <type_traits>

#include "model/activation_math.h"
#include "model/ffn_activation_rows.h"
#include "model/kernel_math.cuh"

namespace causal {
namespace {

using kernel_math::load;
using kernel_math::store;

using activation_math::ValueAndSlope;

constexpr int kThreads = 256;

__device__ inline ValueAndSlope activation(ActivationKind kind, float x) {
  return kind == ActivationKind::kGelu       ? activation_math::gelu_exact(x)
         : kind == ActivationKind::kGeluTanh ? activation_math::gelu_tanh(x)
                                             : activation_math::silu(x);
}

// The pre-activation as the plain composition rounds it: the product plus its bias, in the element type.
template <class T>
__device__ inline float with_bias(const T* product, const float* bias, int64_t i, int64_t column) {
  const float x = load(product + i);
  if (bias == nullptr) return x;
  T rounded;
  store(&rounded, x + bias[column]);
  return load(&rounded);
}

template <class T>
__global__ void ffn_activation_forward_kernel(ActivationKind kind, int64_t count, int64_t width,
                                              const T* first, const T* second, const float* first_bias,
                                              const float* second_bias, T* hidden) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count; i += stride) {
    const int64_t column = i % width;
    const float a = activation(kind, with_bias(first, first_bias, i, column)).value;
    store(hidden + i, second == nullptr ? a : a * with_bias(second, second_bias, i, column));
  }
}

// Block (x, y) takes kThreads columns of the rows of group y: neighbouring threads read neighbouring
// elements, and each thread sums its column's bias gradient over the group's rows.
template <class T>
__global__ void ffn_activation_backward_kernel(ActivationKind kind, int64_t rows, int64_t width,
                                               int64_t rows_per_group, const T* first, const T* second,
                                               const float* first_bias, const float* second_bias, T* hidden,
                                               const T* grad_hidden, T* grad_first, T* grad_second,
                                               float* first_bias_partials, float* second_bias_partials) {
  const int64_t column = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (column >= width) return;
  const int64_t group = blockIdx.y;
  const int64_t first_row = group * rows_per_group;
  const int64_t last_row = first_row + rows_per_group < rows ? first_row + rows_per_group : rows;
  float first_sum = 0.0f, second_sum = 0.0f;
  for (int64_t r = first_row; r < last_row; ++r) {
    const int64_t i = r * width + column;
    const ValueAndSlope a = activation(kind, with_bias(first, first_bias, i, column));
    const float dh = load(grad_hidden + i);
    float d_first;
    if (second == nullptr) {
      if (hidden != nullptr) store(hidden + i, a.value);
      d_first = dh * a.slope;
    } else {
      const float up = with_bias(second, second_bias, i, column);
      if (hidden != nullptr) store(hidden + i, a.value * up);
      d_first = dh * up * a.slope;
      T d_second_rounded;
      store(&d_second_rounded, dh * a.value);
      store(grad_second + i, load(&d_second_rounded));
      second_sum += load(&d_second_rounded);
    }
    // The bias's gradient sums the input's gradient as written, as ATen's sum over the rows of it does.
    T d_first_rounded;
    store(&d_first_rounded, d_first);
    grad_first[i] = d_first_rounded;
    first_sum += load(&d_first_rounded);
  }
  if (first_bias_partials != nullptr) first_bias_partials[group * width + column] = first_sum;
  if (second_bias_partials != nullptr) second_bias_partials[group * width + column] = second_sum;
}

unsigned blocks_for(int64_t count) {
  constexpr int64_t kMaxBlocks = 65536;  // a grid-stride loop covers the rest
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

int launch_ffn_activation_forward(const FfnActivationArgs& a) {
  const int64_t count = a.rows * a.width;
  if (count == 0) return 0;
  const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  kernel_math::with_element_type(a.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ffn_activation_forward_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(
        a.kind, count, a.width, static_cast<const T*>(a.first), static_cast<const T*>(a.second), a.first_bias,
        a.second_bias, static_cast<T*>(a.hidden));
  });
  return static_cast<int>(cudaGetLastError());
}

int launch_ffn_activation_backward(const FfnActivationArgs& a) {
  if (a.rows == 0 || a.width == 0) return 0;
  if (a.rows_per_group < 1) return static_cast<int>(cudaErrorInvalidValue);
  const int64_t groups = group_count(a.rows, a.rows_per_group);
  const dim3 grid(static_cast<unsigned>((a.width + kThreads - 1) / kThreads), static_cast<unsigned>(groups));
  const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  kernel_math::with_element_type(a.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ffn_activation_backward_kernel<T><<<grid, kThreads, 0, stream>>>(
        a.kind, a.rows, a.width, a.rows_per_group, static_cast<const T*>(a.first),
        static_cast<const T*>(a.second), a.first_bias, a.second_bias, static_cast<T*>(a.hidden),
        static_cast<const T*>(a.grad_hidden), static_cast<T*>(a.grad_first), static_cast<T*>(a.grad_second),
        a.first_bias_partials, a.second_bias_partials);
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace causal
