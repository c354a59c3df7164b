// Launch helpers of causal's CUDA kernels (see kernel_launch.h).
#include "model/kernel_launch.h"

#ifdef CAUSAL_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

namespace causal {

bool is_kernel_dtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf;
}

KernelDtype kernel_dtype(c10::ScalarType dtype, const char* what) {
  TORCH_CHECK(is_kernel_dtype(dtype), what, ": no kernel for elements of ", dtype);
  return dtype == c10::kFloat      ? KernelDtype::kFloat
         : dtype == c10::kBFloat16 ? KernelDtype::kBFloat16
                                   : KernelDtype::kHalf;
}

void* current_stream(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

void check_launch(int status, const char* what) {
  TORCH_CHECK(status == 0, what, " failed to launch (CUDA error ", status, ")");
}

}  // namespace causal
#endif
