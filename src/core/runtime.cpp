// Thread and device set-up.
#include "core/runtime.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <thread>

#include "core/errors.h"

namespace causal {

namespace {

// Looked up at run time: OpenBLAS is an implementation detail of the BLAS that LibTorch was linked with
// (absent from a CUDA or MKL build, where these do nothing).
using SetThreads = void (*)(int);
using GetThreads = int (*)();

}  // namespace

int blas_num_threads() {
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : 1;
}

void set_blas_num_threads(int threads) {
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

int64_t configure_threads(int64_t threads) {
  const int64_t n = threads > 0 ? threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
  set_blas_num_threads(1);
  at::set_num_threads(static_cast<int>(n));
  return n;
}

c10::Device resolve_device(const std::string& device) {
  c10::Device parsed(c10::kCPU);
  try {
    parsed = c10::Device(device);
  } catch (const std::exception&) {
    throw ConfigError("device", device, "not a device string (expected cpu, cuda or cuda:N)");
  }
  if (parsed.is_cuda()) {
    if (!torch::cuda::is_available()) {
      throw ConfigError("device", device,
                        "this build or machine has no CUDA (build against a CUDA LibTorch via "
                        "CMAKE_PREFIX_PATH, or use \"cpu\")");
    }
    if (parsed.has_index() && parsed.index() >= static_cast<int>(torch::cuda::device_count())) {
      throw ConfigError("device", device,
                        "only " + std::to_string(torch::cuda::device_count()) + " CUDA device(s) present");
    }
  } else if (!parsed.is_cpu()) {
    throw ConfigError("device", device, "not supported (expected cpu or cuda[:N])");
  }
  return parsed;
}

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
  // "max" (no limit) does not parse as a number and leaves the machine's figure.
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  if (long long limit = 0; limit_file >> limit && limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  return bytes;
}

}  // namespace causal
