// What this binary was built against, for `causal --version` and the bench figures.
#pragma once

#include <string>

namespace causal {

// "LibTorch 2.11.0, CPU, BLAS MKL" or "LibTorch 2.11.0, CUDA 13.0, BLAS MKL".
std::string build_description();

// The BLAS LibTorch's products run on, as LibTorch's build settings name it ("MKL", "OpenBLAS", ...).
std::string blas_name();

}  // namespace causal
