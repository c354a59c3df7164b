// Where a GPU step's time goes: the device's kernels, timed by LibTorch's profiler (Kineto with CUPTI),
// summed by kernel and by kind of work. `causal bench --kernels` prints it; docs/bench.md#kernels.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace causal {

// How many of the longest kernels `causal bench --kernels` lists.
inline constexpr size_t kKernelsShown = 25;

struct KernelTime {
  std::string name;  // the kernel's symbol as CUPTI reports it (or "Memcpy HtoD ..." for copies)
  std::string kind;  // kernel_kind(name)
  double ms = 0.0;   // per profiled step
  double calls = 0;  // per profiled step
};

struct KernelProfile {
  int64_t steps = 0;
  double wall_ms = 0.0;  // per step, host clock around the profiled steps (the profiler's overhead included)
  double busy_ms = 0.0;  // per step, the sum of the device's kernel and copy times
  std::map<std::string, double> kind_ms;  // per step
  std::vector<KernelTime> kernels;        // the longest first

  nlohmann::json to_json(size_t top) const;
  std::string format(size_t top) const;
};

// The kind of work a kernel does, from its name: "matmul", "attention", "norm", "softmax/loss",
// "optimizer", "reduction", "copy/cast", "pointwise" or "other".
std::string kernel_kind(const std::string& name);

// Whether this build can profile kernels (LibTorch 2.x); where it cannot, start() throws UsageError.
bool kernel_profiler_available();

// Collects the device's activity between start() and stop(); one at a time per process.
class KernelProfiler {
 public:
  void start();
  KernelProfile stop(int64_t steps, double wall_ms);
};

}  // namespace causal
