// Process-wide compute settings: CPU threads and the device every tensor of a run is placed on.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace causal {

// How a process's CPU threads are divided between ATen's intra-op pool (elementwise ops, reductions) and
// OpenBLAS's own pool (every matrix product). OpenBLAS's results differ in the last bits between thread
// counts, so a run keeps one split from start to finish and a resumed run takes the checkpoint's.
struct ThreadSplit {
  int64_t aten = 1;
  int64_t blas = 1;

  bool operator==(const ThreadSplit& other) const { return aten == other.aten && blas == other.blas; }
  std::string describe() const;  // "1 ATen + 2 OpenBLAS threads"
};

// Whether LibTorch's BLAS is OpenBLAS, whose pool is set apart from ATen's (found at run time).
bool has_openblas();

// The split for `configured` threads (0 = choose). With OpenBLAS, ATen gets one thread and OpenBLAS the
// rest: both pools spin while idle, so two of them on the same cores slow each other ~3x, and the products
// are most of the work (docs/bench.md). Without it (MKL or CUDA builds) ATen gets them all, LibTorch's own
// rule. For 0: `cores`, less the cores other processes keep busy when that is known, at least 1, because
// a pool that shares a core with another process waits on its slowest thread.
ThreadSplit thread_split_for(int64_t configured, int64_t cores, std::optional<double> busy_elsewhere,
                             bool openblas);

// Cores that processes other than this one kept busy over `window` (/proc/stat, less this process's own
// CPU time); nullopt where /proc is not readable.
std::optional<double> busy_cores_elsewhere(std::chrono::milliseconds window);

// thread_split_for on this machine and why it came out so; for configured 0 with more than one core it
// samples the load first (100 ms), unless `sample_load` is false. Training and bench use this.
struct ThreadChoice {
  ThreadSplit split;
  std::string why;  // "threads 3 in the config", "2 cores, 0.02 busy elsewhere", ...
};
ThreadChoice choose_thread_split(int64_t configured, int64_t cores, bool sample_load = true);

void apply_thread_split(const ThreadSplit& split);

// Evaluation and replay: the split for `threads` without sampling the load, applied; it is returned.
ThreadSplit configure_threads(int64_t threads);

// OpenBLAS's own thread count (1 when LibTorch uses another BLAS), and setting it.
int blas_num_threads();
void set_blas_num_threads(int threads);

// Logical cores of this machine (at least 1).
int64_t machine_cores();

// Parses a device string ("cpu", "cuda", "cuda:1") and checks it is usable in this build;
// throws ConfigError naming the device otherwise.
c10::Device resolve_device(const std::string& device);

// Waits for the device's queued work (CUDA); nothing to wait for on the CPU.
void synchronize(const c10::Device& device);

// The most device memory the caching allocator has had allocated in this process, in MiB
// (torch.cuda.max_memory_allocated's figure); 0 for the CPU and in a build without CUDA.
double peak_device_memory_mib(const c10::Device& device);

// Memory this process can use: physical RAM (sysconf), or the cgroup v2 limit when that is lower
// (containers). 0 when neither can be read.
int64_t physical_memory_bytes();

}  // namespace causal
