// Build facts: the LibTorch version from its headers, CUDA from the build (cmake/LibTorch.cmake defines
// CAUSAL_CUDA_VERSION when LibTorch's CUDA side is linked), the BLAS from what is loaded or LibTorch's own
// build settings.
#include "core/build_info.h"

#include <ATen/Version.h>
#include <torch/version.h>

#include "core/runtime.h"

namespace causal {

namespace {

// The BLAS LibTorch's products run on. Debian's LibTorch names only the "generic" BLAS interface, behind
// which the system's OpenBLAS is found loaded.
std::string blas_name() {
  if (has_openblas()) return "OpenBLAS";
  const std::string config = at::show_config();
  const std::string key = "BLAS_INFO=";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const size_t begin = at + key.size();
  const std::string value = config.substr(begin, config.find_first_of(", \n", begin) - begin);
  if (value == "mkl") return "MKL";
  return value;
}

}  // namespace

std::string build_description() {
#ifdef CAUSAL_CUDA_VERSION
  const std::string device = std::string("CUDA ") + CAUSAL_CUDA_VERSION;
#else
  const std::string device = "CPU";
#endif
  return std::string("LibTorch ") + TORCH_VERSION + ", " + device + ", BLAS " + blas_name();
}

}  // namespace causal
