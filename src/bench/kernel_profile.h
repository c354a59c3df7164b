// Where a step's time goes, from LibTorch's profiler (Kineto): on a GPU the device's kernels (CUPTI), on the
// CPU each ATen operator's self time (its time less that of the operators it called), summed by name and by
// kind of work. `causal bench --kernels` prints it; docs/bench.md#kernels.
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
  std::string name;  // the kernel's symbol as CUPTI reports it (or "Memcpy HtoD ..."), or the operator's name
  std::string kind;  // kernel_kind(name), or operator_kind(name) on the CPU
  double ms = 0.0;   // per profiled step
  double calls = 0;  // per profiled step
};

struct KernelProfile {
  bool cpu = false;  // operators' self times on the CPU, not a GPU's kernels
  int64_t steps = 0;
  double wall_ms = 0.0;  // per step, host clock around the profiled steps (the profiler's overhead included)
  double busy_ms = 0.0;  // per step, the device's kernel and copy times summed (CPU: operators' self times)
  std::map<std::string, double> kind_ms;  // per step
  std::vector<KernelTime> kernels;        // the longest first

  nlohmann::json to_json(size_t top) const;
  std::string format(size_t top) const;
};

// The kind of work a GPU kernel does, from its name: "matmul", "attention", "norm", "softmax/loss",
// "optimizer", "reduction", "copy/cast", "pointwise" or "other".
std::string kernel_kind(const std::string& name);

// The same kinds for an operator the profiler records on the CPU ("aten::mm", "MmBackward0"): views,
// allocation, autograd's own nodes and any other scope are "other", since their self time is dispatch and
// bookkeeping; an ATen operator not named in a kind is "pointwise".
std::string operator_kind(const std::string& name);

// Self time per event: each event's duration less that of the events nested in it on the same thread.
// Events are (thread, start ns, end ns); the result is in the same order, in ns.
struct TimedEvent {
  uint64_t thread = 0;
  uint64_t start_ns = 0, end_ns = 0;
};
std::vector<double> self_times_ns(const std::vector<TimedEvent>& events);

// Throws UsageError, saying why, where this build cannot profile (LibTorch 1.13); start() checks it too.
void require_kernel_profiler();

// Collects the device's activity between start() and stop(); one at a time per process.
class KernelProfiler {
 public:
  void start(bool cpu);  // cpu: ATen operators on the host, else a GPU's kernels
  KernelProfile stop(int64_t steps, double wall_ms);

 private:
  bool cpu_ = false;
};

}  // namespace causal
