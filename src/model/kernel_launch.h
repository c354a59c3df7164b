// What the sources that launch causal's CUDA kernels share: a tensor's element type and current stream in
// the kernels' LibTorch-free terms, and one error for a failed launch. Defined only in a CAUSAL_CUDA build
// (CAUSAL_CUDA_KERNELS); call them from code under that macro.
#pragma once

#include <ATen/core/Tensor.h>

#include "model/kernel_args.h"

namespace causal {

// Whether the kernels take elements of `dtype` (float32, bfloat16, float16).
bool is_kernel_dtype(c10::ScalarType dtype);

// `dtype` as the kernels name it; throws for a dtype they do not take (`what` names the caller).
KernelDtype kernel_dtype(c10::ScalarType dtype, const char* what);

// The current CUDA stream of t's device, as the kernels' `void* stream`.
void* current_stream(const at::Tensor& t);

// Throws "<what> failed to launch (CUDA error N)" unless status is 0.
void check_launch(int status, const char* what);

}  // namespace causal
