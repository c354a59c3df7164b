// Thread and device set-up.
#include "core/runtime.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <spdlog/fmt/fmt.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "core/errors.h"

#ifdef CAUSAL_CUDA_VERSION
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace causal {

namespace {

// Looked up at run time: OpenBLAS is an implementation detail of the BLAS that LibTorch was linked with
// (absent from a CUDA or MKL build, where these do nothing).
using SetThreads = void (*)(int);
using GetThreads = int (*)();

SetThreads openblas_set_num_threads() {
  return reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
}

}  // namespace

int blas_num_threads() {
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : 1;
}

void set_blas_num_threads(int threads) {
  if (SetThreads set = openblas_set_num_threads()) set(threads);
}

bool has_openblas() { return openblas_set_num_threads() != nullptr; }

int64_t machine_cores() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

std::string ThreadSplit::describe() const {
  if (!has_openblas()) return std::to_string(aten) + " ATen thread" + (aten == 1 ? "" : "s");
  return std::to_string(aten) + " ATen + " + std::to_string(blas) + " OpenBLAS thread" +
         (blas == 1 ? "" : "s");
}

ThreadSplit thread_split_for(int64_t configured, int64_t cores, std::optional<double> busy_elsewhere,
                             bool openblas) {
  int64_t n = configured > 0 ? configured : std::max<int64_t>(1, cores);
  if (configured <= 0 && busy_elsewhere) {
    // A core counts as free when at most a quarter of it is taken: a short burst elsewhere (a shell, a
    // log reader) must not halve the run, a steady process on it must.
    const double free = static_cast<double>(n) - *busy_elsewhere;
    n = std::clamp<int64_t>(static_cast<int64_t>(std::floor(free + 0.25)), 1, n);
  }
  return openblas ? ThreadSplit{1, n} : ThreadSplit{n, 1};
}

namespace {

// Jiffies since boot: all of them, and those no CPU was idle or waiting in (first line of /proc/stat).
std::optional<std::pair<double, double>> cpu_jiffies() {
  std::ifstream stat("/proc/stat");
  std::string label;
  if (!(stat >> label) || label != "cpu") return std::nullopt;
  double total = 0.0, idle = 0.0, value = 0.0;
  for (int field = 0; field < 8 && stat >> value; ++field) {
    total += value;
    if (field == 3 || field == 4) idle += value;  // idle, iowait
  }
  return std::make_pair(total, total - idle);
}

// This process's user + system CPU time in jiffies (/proc/self/stat fields 14 and 15).
std::optional<double> own_jiffies() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  const auto close = line.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double user = 0.0, system = 0.0;
  for (int index = 3; index <= 15 && rest >> field; ++index) {
    if (index == 14) user = std::strtod(field.c_str(), nullptr);
    if (index == 15) system = std::strtod(field.c_str(), nullptr);
  }
  return user + system;
}

}  // namespace

std::optional<double> busy_cores_elsewhere(std::chrono::milliseconds window) {
  const auto before = cpu_jiffies();
  const auto own_before = own_jiffies();
  std::this_thread::sleep_for(window);
  const auto after = cpu_jiffies();
  const auto own_after = own_jiffies();
  if (!before || !after || !own_before || !own_after || after->first <= before->first) return std::nullopt;
  const double busy = (after->second - before->second) - (*own_after - *own_before);
  const double cores = static_cast<double>(machine_cores());
  return std::clamp(cores * busy / (after->first - before->first), 0.0, cores);
}

ThreadChoice choose_thread_split(int64_t configured, int64_t cores, bool sample_load) {
  const std::optional<double> busy = configured <= 0 && cores > 1 && sample_load
                                         ? busy_cores_elsewhere(std::chrono::milliseconds(100))
                                         : std::nullopt;
  ThreadChoice choice{thread_split_for(configured, cores, busy, has_openblas()), ""};
  if (configured > 0) {
    choice.why = "threads " + std::to_string(configured) + " in the config";
  } else {
    choice.why = busy ? fmt::format("threads 0: {} cores, {:.2f} busy elsewhere", cores, *busy)
                      : fmt::format("threads 0: {} cores", cores);
  }
  return choice;
}

void apply_thread_split(const ThreadSplit& split) {
  set_blas_num_threads(static_cast<int>(split.blas));
  at::set_num_threads(static_cast<int>(split.aten));
}

ThreadSplit configure_threads(int64_t threads) {
  const ThreadSplit split = thread_split_for(threads, machine_cores(), std::nullopt, has_openblas());
  apply_thread_split(split);
  return split;
}

c10::Device resolve_device(const std::string& device) {
  c10::Device parsed(c10::kCPU);
  try {
    parsed = c10::Device(device);
  } catch (const std::exception&) {
    throw ConfigError("device", device, "not a device string (expected cpu, cuda or cuda:N)");
  }
  if (parsed.is_cuda()) {
    if (!torch::cuda::is_available()) {
      throw ConfigError("device", device,
                        "this build or machine has no CUDA (build against a CUDA LibTorch via "
                        "CMAKE_PREFIX_PATH, or use \"cpu\")");
    }
    if (parsed.has_index() && parsed.index() >= static_cast<int>(torch::cuda::device_count())) {
      throw ConfigError("device", device,
                        "only " + std::to_string(torch::cuda::device_count()) + " CUDA device(s) present");
    }
  } else if (!parsed.is_cpu()) {
    throw ConfigError("device", device, "not supported (expected cpu or cuda[:N])");
  }
  return parsed;
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

double peak_device_memory_mib(const c10::Device& device) {
#ifdef CAUSAL_CUDA_VERSION
  if (device.is_cuda()) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.has_index() ? device.index() : 0);
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return static_cast<double>(stats.allocated_bytes[aggregate].peak) / (1024.0 * 1024.0);
  }
#endif
  (void)device;
  return 0.0;
}

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
  // "max" (no limit) does not parse as a number and leaves the machine's figure.
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  if (long long limit = 0; limit_file >> limit && limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  return bytes;
}

}  // namespace causal
