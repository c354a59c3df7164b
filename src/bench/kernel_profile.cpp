// GPU kernel times from LibTorch's Kineto profiler.
#include "bench/kernel_profile.h"

#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/errors.h"

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

namespace causal {
namespace {

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

std::string kernel_kind(const std::string& name) {
  // Order matters: cuBLAS names its epilogue kernels after the product ("gemm ... bias"), and the fused
  // AdamW kernel is a multi-tensor "apply".
  if (contains(name, "Memcpy") || contains(name, "Memset")) return "copy/cast";
  if (contains(name, "flash") || contains(name, "fmha") || contains(name, "attention") ||
      contains(name, "Attention"))
    return "attention";
  if (contains(name, "gemm") || contains(name, "Gemm") || contains(name, "sm90_xmma") ||
      contains(name, "cutlass") || contains(name, "nvjet") || contains(name, "splitKreduce"))
    return "matmul";
  if (contains(name, "adam") || contains(name, "Adam")) return "optimizer";
  if (contains(name, "layer_norm") || contains(name, "LayerNorm") || contains(name, "rms_norm") ||
      contains(name, "RowwiseMoments") || contains(name, "ComputeInternalGradients") ||
      contains(name, "GammaBeta"))
    return "norm";
  if (contains(name, "softmax") || contains(name, "Softmax") || contains(name, "SoftMax") ||
      contains(name, "nll_loss") || contains(name, "cross_entropy"))
    return "softmax/loss";
  if (contains(name, "reduce_kernel") || contains(name, "norm_kernel") ||
      contains(name, "multi_tensor_apply"))
    return "reduction";
  if (contains(name, "copy") || contains(name, "cat_") || contains(name, "CatArray") ||
      contains(name, "index") || contains(name, "embedding"))
    return "copy/cast";
  if (contains(name, "elementwise") || contains(name, "vectorized") || contains(name, "unrolled") ||
      contains(name, "pointwise"))
    return "pointwise";
  return "other";
}

nlohmann::json KernelProfile::to_json(size_t top) const {
  nlohmann::json out{{"steps", steps}, {"wall_ms", wall_ms}, {"busy_ms", busy_ms}, {"kind_ms", kind_ms}};
  out["kernels"] = nlohmann::json::array();
  for (size_t i = 0; i < std::min(top, kernels.size()); ++i)
    out["kernels"].push_back({{"name", kernels[i].name},
                              {"kind", kernels[i].kind},
                              {"ms", kernels[i].ms},
                              {"calls", kernels[i].calls}});
  return out;
}

std::string KernelProfile::format(size_t top) const {
  std::string text;
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "kernels: %lld profiled steps, per step %.2f ms of kernels and copies in %.2f ms of wall time "
      "(the device idle %.1f%%)\n",
      static_cast<long long>(steps), busy_ms, wall_ms,
      wall_ms > 0 ? 100.0 * std::max(0.0, wall_ms - busy_ms) / wall_ms : 0.0);
  text += line;
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [kind, ms] : kind_ms) kinds.emplace_back(ms, kind);
  std::sort(kinds.rbegin(), kinds.rend());
  for (const auto& [ms, kind] : kinds) {
    std::snprintf(line, sizeof(line), "  %-14s %9.2f ms  %5.1f%%\n", kind.c_str(), ms,
                  busy_ms > 0 ? 100.0 * ms / busy_ms : 0.0);
    text += line;
  }
  for (size_t i = 0; i < std::min(top, kernels.size()); ++i) {
    const KernelTime& k = kernels[i];
    std::snprintf(line, sizeof(line), "  %9.3f ms %6.1f calls  %-12s %.150s\n", k.ms, k.calls, k.kind.c_str(),
                  k.name.c_str());
    text += line;
  }
  return text;
}

#if TORCH_VERSION_MAJOR >= 2

namespace {
namespace profiler = torch::profiler::impl;

profiler::ProfilerConfig kineto_config() { return profiler::ProfilerConfig(profiler::ProfilerState::KINETO); }
const std::set<profiler::ActivityType> kActivities{profiler::ActivityType::CPU, profiler::ActivityType::CUDA};

}  // namespace

bool kernel_profiler_available() { return true; }

void KernelProfiler::start() {
  torch::autograd::profiler::prepareProfiler(kineto_config(), kActivities);
  torch::autograd::profiler::enableProfiler(kineto_config(), kActivities);
}

KernelProfile KernelProfiler::stop(int64_t steps, double wall_ms) {
  const std::unique_ptr<torch::autograd::profiler::ProfilerResult> result =
      torch::autograd::profiler::disableProfiler();
  KernelProfile profile;
  profile.steps = steps;
  const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(steps, 1));
  profile.wall_ms = wall_ms * per_step;
  std::map<std::string, KernelTime> by_name;
  for (const auto& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CUDA) continue;
    const double ms = static_cast<double>(event.durationNs()) / 1e6 * per_step;
    KernelTime& k = by_name[event.name()];
    k.ms += ms;
    k.calls += per_step;
    profile.busy_ms += ms;
  }
  for (auto& [name, k] : by_name) {
    k.name = name;
    k.kind = kernel_kind(name);
    profile.kind_ms[k.kind] += k.ms;
    profile.kernels.push_back(k);
  }
  std::sort(profile.kernels.begin(), profile.kernels.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return profile;
}

#else

bool kernel_profiler_available() { return false; }

void KernelProfiler::start() {
  throw UsageError("--kernels needs LibTorch 2.x (its Kineto profiler); this build has LibTorch " +
                   std::string(TORCH_VERSION));
}

KernelProfile KernelProfiler::stop(int64_t, double) { return {}; }

#endif

}  // namespace causal
