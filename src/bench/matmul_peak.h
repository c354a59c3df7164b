// Model FLOP utilisation: the model's FLOPs per second against a matmul peak measured on this machine,
// in this process (a spec sheet's peak would say nothing about a shared 2-core VM).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <chrono>
#include <string>

namespace causal {

// FLOP/s of the fastest n x n x n matmul in `dtype` (the dtype the model's products run in: float32, or
// bfloat16 under autocast) on `device` (2 n^3 FLOPs each, after a warm-up of each size). On the CPU: over
// n = 512, 768, 1024, 1536, 2048, each product timed alone, with every core the BLAS can use, as a user
// measuring the machine would; the run's own thread settings are restored afterwards. On a GPU: over
// n = 1024, 2048, 4096, 8192, each timed as bursts of 10 products between synchronisations. On the CPU no
// larger size is started after kPeakMeasureBudget. Measured once per device, dtype and process, then
// remembered, and stored in the peak cache (train/peak_cache.h) for later processes.
double measure_matmul_peak(const c10::Device& device, c10::ScalarType dtype = c10::kFloat);

// fp32 on 2 cores needs about 0.5 s for every size; a slow dtype stops early with the sizes it reached.
inline constexpr std::chrono::seconds kPeakMeasureBudget{2};

// A parent that starts several runs at once (`causal sweep`, the test suite) measures once and passes
// the peak down in this variable: runs measuring together would each see the others' load.
inline constexpr const char* kMatmulPeakVariable = "CAUSAL_MATMUL_PEAK_GFLOPS";

struct MatmulPeak {
  double flops = 0.0;  // per second
  std::string source;  // "measured here", "measured on this machine 5 min ago, kept in <file>" or
                       // "from CAUSAL_MATMUL_PEAK_GFLOPS"
};
// The peak MFU is reported against: kMatmulPeakVariable when set, else the peak cache's entry for this
// machine when it is at most a day old, else measure_matmul_peak(device). `causal bench` always measures.
// Throws UsageError naming the variable when its value is not a positive number of GFLOP/s.
MatmulPeak matmul_peak(const c10::Device& device, c10::ScalarType dtype = c10::kFloat);

}  // namespace causal
