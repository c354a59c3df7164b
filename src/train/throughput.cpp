// Matmul peak measurement.
#include "train/throughput.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>

namespace causal {

double measure_matmul_peak(const c10::Device& device, int64_t n) {
  // A private generator: drawing from the default one would shift init and dropout of the run.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1234);
  const at::Tensor a = at::rand({n, n}, generator, at::kFloat).to(device);
  const at::Tensor b = a.t().contiguous();
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor c = at::mm(a, b);
    sync();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0 && seconds > 0) best = std::max(best, 2.0 * n * n * n / seconds);  // rep 0 warms up
  }
  return best;
}

}  // namespace causal
