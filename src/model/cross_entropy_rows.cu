// The chunked loss's row kernel (cross_entropy_rows.h): one block per row, two passes over it.
#include <cmath>
#include <type_traits>

#include "model/cross_entropy_rows.h"
#include "model/kernel_math.cuh"

namespace causal {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

using kernel_math::load;
using kernel_math::store;

// A running log-sum-exp: the largest value m seen and the sum s of exp(x - m). A NaN logit makes s NaN
// (every comparison with it is false, so it lands in the sum), as it makes ATen's log-sum-exp NaN.
struct Running {
  float m;
  float s;
  float a;  // largest |x|, NaN once a NaN was seen
};

__device__ inline void add_value(Running& r, float x) {
  if (x > r.m) {
    r.s = r.s * expf(r.m - x) + 1.0f;
    r.m = x;
  } else if (x != -INFINITY) {
    r.s += expf(x - r.m);
  }
  r.a = (x != x || r.a != r.a) ? NAN : fmaxf(r.a, fabsf(x));
}

__device__ inline Running combine(const Running& p, const Running& q) {
  const float a = (p.a != p.a || q.a != q.a) ? NAN : fmaxf(p.a, q.a);
  // A side that saw nothing (m = -inf, s = 0) adds nothing: exp(-inf - -inf) would be NaN. A side that saw
  // only NaN has m = -inf too, but s = NaN, which the sum below carries on.
  if (p.m == -INFINITY && p.s == 0.0f) return Running{q.m, q.s, a};
  if (q.m == -INFINITY && q.s == 0.0f) return Running{p.m, p.s, a};
  const float m = fmaxf(p.m, q.m);
  return Running{m, p.s * expf(p.m - m) + q.s * expf(q.m - m), a};
}

__device__ Running warp_reduce(Running r) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    Running other;
    other.m = __shfl_down_sync(0xffffffffu, r.m, offset);
    other.s = __shfl_down_sync(0xffffffffu, r.s, offset);
    other.a = __shfl_down_sync(0xffffffffu, r.a, offset);
    r = combine(r, other);
  }
  return r;
}

// Every thread's running figures combined, returned to every thread.
__device__ Running block_reduce(Running r) {
  __shared__ Running warp_results[kWarps];
  r = warp_reduce(r);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_results[warp] = r;
  __syncthreads();
  if (warp == 0) {
    r = warp_reduce(lane < kWarps ? warp_results[lane] : Running{-INFINITY, 0.0f, 0.0f});
    if (lane == 0) warp_results[0] = r;
  }
  __syncthreads();
  return warp_results[0];
}

template <class T>
__global__ void cross_entropy_rows_kernel(T* logits, int64_t vocab, int64_t row_stride, const int64_t* labels,
                                          int64_t ignore_label, float* loss, float* max_abs,
                                          bool write_gradient) {
  const int64_t row = blockIdx.x;
  T* x = logits + row * row_stride;
  const int64_t label = labels[row];
  const bool in_loss = label != ignore_label;
  const bool bad_label = in_loss && (label < 0 || label >= vocab);

  Running r{-INFINITY, 0.0f, 0.0f};
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) add_value(r, load(x + j));
  r = block_reduce(r);
  const float lse = r.m == -INFINITY ? -INFINITY : r.m + logf(r.s);

  if (threadIdx.x == 0) {
    if (!in_loss) {
      loss[row] = 0.0f;
    } else if (bad_label) {
      loss[row] = NAN;
    } else {
      loss[row] = lse - load(x + label);
    }
    if (max_abs != nullptr) max_abs[row] = r.a;
  }
  if (!write_gradient) return;
  // Every thread read its label's logit above (thread 0) before any thread overwrites the row.
  __syncthreads();
  for (int64_t j = threadIdx.x; j < row_stride; j += kThreads) {
    float g = 0.0f;
    if (in_loss && j < vocab) {
      g = expf(load(x + j) - lse);
      if (j == label) g -= 1.0f;
      if (bad_label) g = NAN;
    }
    store(x + j, g);
  }
}

}  // namespace

int launch_cross_entropy_rows(const CrossEntropyRowsArgs& args) {
  if (args.rows == 0) return 0;
  const dim3 grid(static_cast<unsigned>(args.rows));
  const cudaStream_t stream = static_cast<cudaStream_t>(args.stream);
  kernel_math::with_element_type(args.dtype, [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    cross_entropy_rows_kernel<T><<<grid, kThreads, 0, stream>>>(
        static_cast<T*>(args.logits), args.vocab, args.row_stride, args.labels, args.ignore_label, args.loss,
        args.max_abs, args.write_gradient);
  });
  return static_cast<int>(cudaGetLastError());
}

}  // namespace causal
