// Model FLOP utilisation: the model's FLOPs per second against a matmul peak measured on this machine,
// in this process, at start-up (a spec sheet's peak would say nothing about a shared 2-core VM).
#pragma once

#include <c10/core/Device.h>

namespace causal {

// FLOP/s of the best of a few n x n x n float32 matmuls on `device` after a warm-up (2 n^3 FLOPs each).
double measure_matmul_peak(const c10::Device& device, int64_t n = 1024);

}  // namespace causal
