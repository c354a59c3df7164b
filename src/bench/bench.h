// `causal bench`: the training step of a config, timed phase by phase, against a matmul peak measured in
// the same process; nothing is written to disk.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/kernel_profile.h"
#include "config/config.h"
#include "core/runtime.h"

namespace causal {

struct BenchOptions {
  int64_t steps = 20;        // timed optimizer steps
  int64_t warmup = 5;        // untimed steps first (allocator, caches, first-call costs)
  bool measure_peak = true;  // false: matmul_peak_gflops and mfu stay 0
  int64_t kernel_steps = 0;  // > 0: after the timed steps, this many more under the kernel profiler
};

// Medians over the timed steps, except the peak (best over sizes) and memory (peak so far).
struct BenchResult {
  double ms_per_step = 0.0;
  double tokens_per_s = 0.0;  // input positions per second, padding included
  double forward_ms = 0.0;    // forward passes and loss, all micro-batches of a step
  double backward_ms = 0.0;
  double optimizer_ms = 0.0;  // clipping and the AdamW update
  double achieved_gflops = 0.0;
  double matmul_peak_gflops = 0.0;
  double mfu = 0.0;
  double peak_rss_mib = 0.0;
  double peak_device_mib = 0.0;  // on a GPU: allocated device memory at its peak (0 on the CPU)
  // Micro-batches of the timed steps replayed from a CUDA graph (train.cuda_graphs); forward_ms then holds
  // their forward and backward, backward_ms none of it.
  int64_t graph_replays = 0;
  std::string graph_failure;   // why a capture failed (the steps then ran eagerly), or ""
  int64_t threads = 0;         // the larger pool of the split: OpenBLAS's where LibTorch uses it, else ATen's
  ThreadChoice thread_choice;  // not in the JSON: its keys are the figures above
  KernelProfile kernels;       // BenchOptions::kernel_steps > 0 only; in the JSON as "kernels" then

  nlohmann::json to_json() const;  // exactly the fields above, by name (and "kernels" when profiled)
};

// Builds the model, optimizer and training batches as `causal train` would (same task, same step) and
// times `warmup + steps` steps. Throws what train_run throws for a bad config or data.
BenchResult run_bench(const RunConfig& config, const BenchOptions& options);

// The median of timings; 0 for none.
double median(std::vector<double> values);

// The human-readable table of a result.
std::string format_bench(const BenchResult& result, const RunConfig& config);

}  // namespace causal
