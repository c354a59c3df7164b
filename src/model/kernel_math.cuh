// Device helpers shared by causal's CUDA kernels (src/model/*.cu): loads and stores that compute in float32
// whatever the element type, and sums over a warp or a block in a fixed order (the same bits every run).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "model/kernel_args.h"

namespace causal {
namespace kernel_math {

__device__ inline float load(const float* p) { return *p; }
__device__ inline float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ inline float load(const __half* p) { return __half2float(*p); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ inline void store(__half* p, float v) { *p = __float2half(v); }

// The sum over the warp's 32 lanes, returned to every lane.
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum over a block of kThreads threads (a multiple of 32), returned to every thread. Every thread of the
// block must call it; `scratch` holds kThreads / 32 floats of shared memory, free again on return.
template <int kThreads>
__device__ inline float block_sum(float v, float* scratch) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "a block of whole warps");
  constexpr int kWarps = kThreads / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = warp_sum(lane < kWarps ? scratch[lane] : 0.0f);
  __syncthreads();  // before a next call writes scratch again
  return total;
}

// Calls f with a null pointer of the C++ type of `dtype`, to pick a kernel's template instance.
template <class F>
inline void with_element_type(KernelDtype dtype, F&& f) {
  switch (dtype) {
    case KernelDtype::kFloat:
      f(static_cast<float*>(nullptr));
      break;
    case KernelDtype::kBFloat16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case KernelDtype::kHalf:
      f(static_cast<__half*>(nullptr));
      break;
  }
}

}  // namespace kernel_math
}  // namespace causal
