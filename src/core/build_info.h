// What this binary was built against, for `causal --version`.
#pragma once

#include <string>

namespace causal {

// "LibTorch 2.11.0, CPU, BLAS MKL" or "LibTorch 2.11.0, CUDA 13.0, BLAS MKL".
std::string build_description();

}  // namespace causal
