// Model FLOP utilisation: the model's FLOPs per second against a matmul peak measured on this machine,
// in this process (a spec sheet's peak would say nothing about a shared 2-core VM).
#pragma once

#include <c10/core/Device.h>

namespace causal {

// FLOP/s of the fastest float32 n x n x n matmul on `device` over n = 512, 768, 1024, 1536, 2048 (2 n^3
// FLOPs each, after a warm-up of each size), with every core the BLAS can use, as a user measuring the
// machine would; the run's own thread settings are restored afterwards. Measured once per device and
// process, then remembered.
double measure_matmul_peak(const c10::Device& device);

// Waits for the device's queued work (CUDA); nothing to wait for on the CPU.
void synchronize(const c10::Device& device);

}  // namespace causal
