// Process-wide compute settings: CPU threads and the device every tensor of a run is placed on.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace causal {

// Sets ATen's intra-op threads (0 = all cores) and pins OpenBLAS to one thread: its own pool and ATen's
// OpenMP threads otherwise fight over the same cores (~2.5x slower training). Returns the thread count.
int64_t configure_threads(int64_t threads);

// OpenBLAS's own thread count (1 when LibTorch uses another BLAS), and setting it.
int blas_num_threads();
void set_blas_num_threads(int threads);

// Parses a device string ("cpu", "cuda", "cuda:1") and checks it is usable in this build;
// throws ConfigError naming the device otherwise.
c10::Device resolve_device(const std::string& device);

// Memory this process can use: physical RAM (sysconf), or the cgroup v2 limit when that is lower
// (containers). 0 when neither can be read.
int64_t physical_memory_bytes();

}  // namespace causal
