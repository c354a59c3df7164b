// Matmul peak measurement.
#include "bench/matmul_peak.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "bench/peak_cache.h"
#include "core/environment.h"
#include "core/errors.h"
#include "core/runtime.h"

namespace causal {

namespace {

// A GPU finishes a 2048^3 product in tens of microseconds, so one product per timing would measure the
// launch and the synchronisation; there each size is timed over a burst of products, up to 8192^3.
double measure_once_on_gpu(const c10::Device& device, c10::ScalarType dtype) {
  // A private CPU generator (the device's default one draws the run's dropout), one 1024 x 1024 block
  // tiled up: the products' speed does not depend on the values, and drawing 8192^2 on the host is slow.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1234);
  const at::Tensor block = at::rand({1024, 1024}, generator, at::kFloat).to(device, dtype);
  constexpr int kBurst = 10;
  double best = 0.0;
  for (const int64_t n : {1024, 2048, 4096, 8192}) {
    const at::Tensor a = block.repeat({n / 1024, n / 1024});
    const at::Tensor b = a.t().contiguous();
    at::Tensor c = at::mm(a, b);  // warm-up: the library picks and loads its kernel
    for (int round = 0; round < 3; ++round) {
      synchronize(device);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kBurst; ++i) at::mm_out(c, a, b);
      synchronize(device);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (seconds > 0) best = std::max(best, kBurst * 2.0 * n * n * n / seconds);
    }
  }
  return best;
}

double measure_once(const c10::Device& device, c10::ScalarType dtype) {
  if (!device.is_cpu()) return measure_once_on_gpu(device, dtype);
  // Every core, as a user timing torch.mm would get; the run's own settings come back afterwards.
  const int aten_threads = at::get_num_threads();
  const int blas_threads = blas_num_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(cores);
  set_blas_num_threads(cores);
  // A private generator: drawing from the default one would shift init and dropout of the run.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1234);
  double best = 0.0;
  const auto start = std::chrono::steady_clock::now();
  for (const int64_t n : {512, 768, 1024, 1536, 2048}) {
    // A dtype without fast kernels here (bfloat16 on most CPUs: ~4 GFLOP/s) would take minutes to 2048.
    if (std::chrono::steady_clock::now() - start > kPeakMeasureBudget) break;
    const at::Tensor a = at::rand({n, n}, generator, at::kFloat).to(device, dtype);
    const at::Tensor b = a.t().contiguous();
    // The largest size costs ~0.3 s a multiply on 2 cores: fewer repeats there.
    const int reps = n >= 1536 ? 2 : 4;
    for (int rep = 0; rep <= reps; ++rep) {
      synchronize(device);
      const auto t0 = std::chrono::steady_clock::now();
      const at::Tensor c = at::mm(a, b);
      synchronize(device);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0 && seconds > 0) best = std::max(best, 2.0 * n * n * n / seconds);  // rep 0 warms up
    }
  }
  at::set_num_threads(aten_threads);
  set_blas_num_threads(blas_threads);
  return best;
}

std::string describe_age(double seconds) {
  if (seconds < 120) return std::to_string(static_cast<int64_t>(seconds)) + " s ago";
  if (seconds < 7200) return std::to_string(static_cast<int64_t>(seconds / 60)) + " min ago";
  return std::to_string(static_cast<int64_t>(seconds / 3600)) + " h ago";
}

}  // namespace

double measure_matmul_peak(const c10::Device& device, c10::ScalarType dtype) {
  // Once per device, dtype and process: the machine does not change between the runs of one process (tests,
  // sweeps), and each measurement costs about half a second.
  static std::mutex mutex;
  static std::map<std::string, double> peaks;
  const std::lock_guard<std::mutex> lock(mutex);
  const std::string key = peak_cache_key(device, dtype);
  const auto known = peaks.find(key);
  if (known != peaks.end()) return known->second;
  const double peak = peaks[key] = measure_once(device, dtype);
  if (const auto file = peak_cache_file()) store_cached_peak(*file, key, peak / 1e9, unix_seconds());
  return peak;
}

MatmulPeak matmul_peak(const c10::Device& device, c10::ScalarType dtype) {
  const std::optional<std::string> inherited = environment_variable(kMatmulPeakVariable);
  if (!inherited) {
    if (const auto file = peak_cache_file()) {
      if (const auto cached = read_cached_peak(*file, peak_cache_key(device, dtype), unix_seconds()))
        return {cached->gflops * 1e9, "measured on this machine " + describe_age(cached->age_seconds) +
                                          ", kept in " + file->string()};
    }
    return {measure_matmul_peak(device, dtype), "measured here"};
  }
  char* end = nullptr;
  const double gflops = std::strtod(inherited->c_str(), &end);
  if (*end != '\0' || !std::isfinite(gflops) || gflops <= 0) {
    throw UsageError(std::string(kMatmulPeakVariable) + "=" + *inherited +
                     ": expected a positive number of GFLOP/s (as printed by `causal bench --matmul-peak`)");
  }
  return {gflops * 1e9, std::string("from ") + kMatmulPeakVariable};
}

}  // namespace causal
