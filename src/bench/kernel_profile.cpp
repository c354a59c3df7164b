// GPU kernel and CPU operator times from LibTorch's Kineto profiler.
#include "bench/kernel_profile.h"

#include <spdlog/fmt/fmt.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
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

std::string operator_kind(const std::string& name) {
  static const std::string kAten = "aten::";
  if (name.compare(0, kAten.size(), kAten) != 0) return "other";
  const std::string op = " " + name.substr(kAten.size()) + " ";
  // Space-separated names, each with a space on both sides.
  static const std::string kMatmul = " mm bmm addmm addmm_ baddbmm baddbmm_ addbmm matmul linear ";
  static const std::string kReduction =
      " sum mean amax amin max min any all argmax norm prod std var _foreach_norm linalg_vector_norm ";
  static const std::string kCopy =
      " copy_ _to_copy cat clone embedding embedding_dense_backward index_select index index_put_ fill_ "
      "zero_ zeros zeros_like ones ones_like full repeat repeat_interleave constant_pad_nd _foreach_copy_ ";
  static const std::string kDispatch =
      " view reshape _reshape_alias _unsafe_view transpose t expand expand_as as_strided narrow slice select "
      "unsqueeze squeeze permute split split_with_sizes chunk unbind detach detach_ alias empty empty_like "
      "empty_strided resize_ result_type to contiguous flatten unflatten view_as lift_fresh set_ item "
      "_local_scalar_dense is_nonzero ";
  if (contains(kMatmul, op.c_str())) return "matmul";
  if (contains(op, "attention")) return "attention";
  if (contains(op, "layer_norm") || contains(op, "rms_norm")) return "norm";
  if (contains(op, "softmax") || contains(op, "nll_loss") || contains(op, "cross_entropy"))
    return "softmax/loss";
  if (contains(op, "adam")) return "optimizer";
  if (contains(kReduction, op.c_str())) return "reduction";
  if (contains(kCopy, op.c_str())) return "copy/cast";
  if (contains(kDispatch, op.c_str())) return "other";
  return "pointwise";
}

std::vector<double> self_times_ns(const std::vector<TimedEvent>& events) {
  std::vector<size_t> order(events.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Per thread, by start; of two events that start together the longer encloses the other.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TimedEvent &x = events[a], &y = events[b];
    if (x.thread != y.thread) return x.thread < y.thread;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.end_ns > y.end_ns;
  });
  std::vector<double> self(events.size());
  for (size_t i = 0; i < events.size(); ++i)
    self[i] = static_cast<double>(events[i].end_ns - std::min(events[i].start_ns, events[i].end_ns));
  std::vector<size_t> open;  // the events enclosing the current one, innermost last
  for (const size_t i : order) {
    const TimedEvent& event = events[i];
    if (!open.empty() && events[open.back()].thread != event.thread) open.clear();
    while (!open.empty() && events[open.back()].end_ns <= event.start_ns) open.pop_back();
    if (!open.empty()) {
      const uint64_t end = std::min(event.end_ns, events[open.back()].end_ns);
      self[open.back()] -= static_cast<double>(end - std::min(end, event.start_ns));
    }
    open.push_back(i);
  }
  for (double& t : self) t = std::max(0.0, t);
  return self;
}

nlohmann::json KernelProfile::to_json(size_t top) const {
  nlohmann::json out{{"device", cpu ? "cpu" : "gpu"},
                     {"steps", steps},
                     {"wall_ms", wall_ms},
                     {"busy_ms", busy_ms},
                     {"kind_ms", kind_ms}};
  out["kernels"] = nlohmann::json::array();
  for (size_t i = 0; i < std::min(top, kernels.size()); ++i)
    out["kernels"].push_back({{"name", kernels[i].name},
                              {"kind", kernels[i].kind},
                              {"ms", kernels[i].ms},
                              {"calls", kernels[i].calls}});
  return out;
}

std::string KernelProfile::format(size_t top) const {
  const double outside = wall_ms > 0 ? 100.0 * std::max(0.0, wall_ms - busy_ms) / wall_ms : 0.0;
  std::string text =
      cpu ? fmt::format(
                "operators: {} profiled steps, per step {:.2f} ms of ATen operators' self time in {:.2f} "
                "ms of wall time (outside any operator {:.1f}%)\n",
                steps, busy_ms, wall_ms, outside)
          : fmt::format(
                "kernels: {} profiled steps, per step {:.2f} ms of kernels and copies in {:.2f} ms of "
                "wall time (the device idle {:.1f}%)\n",
                steps, busy_ms, wall_ms, outside);
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [kind, ms] : kind_ms) kinds.emplace_back(ms, kind);
  std::sort(kinds.rbegin(), kinds.rend());
  for (const auto& [ms, kind] : kinds)
    text +=
        fmt::format("  {:<14} {:9.2f} ms  {:5.1f}%\n", kind, ms, busy_ms > 0 ? 100.0 * ms / busy_ms : 0.0);
  for (size_t i = 0; i < std::min(top, kernels.size()); ++i) {
    const KernelTime& k = kernels[i];
    text += fmt::format("  {:9.3f} ms {:6.1f} calls  {:<12} {:.150}\n", k.ms, k.calls, k.kind, k.name);
  }
  return text;
}

#if TORCH_VERSION_MAJOR >= 2

namespace {
namespace profiler = torch::profiler::impl;

profiler::ProfilerConfig kineto_config() { return profiler::ProfilerConfig(profiler::ProfilerState::KINETO); }

}  // namespace

void require_kernel_profiler() {}

void KernelProfiler::start(bool cpu) {
  cpu_ = cpu;
  // A CUDA build's Kineto looks for a GPU even for a CPU-only profile and logs an error line when there is
  // none; unless the user chose a level, it logs nothing below fatal then.
  if (cpu) setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  std::set<profiler::ActivityType> activities{profiler::ActivityType::CPU};
  if (!cpu) activities.insert(profiler::ActivityType::CUDA);
  torch::autograd::profiler::prepareProfiler(kineto_config(), activities);
  torch::autograd::profiler::enableProfiler(kineto_config(), activities);
}

KernelProfile KernelProfiler::stop(int64_t steps, double wall_ms) {
  const std::unique_ptr<torch::autograd::profiler::ProfilerResult> result =
      torch::autograd::profiler::disableProfiler();
  KernelProfile profile;
  profile.cpu = cpu_;
  profile.steps = steps;
  const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(steps, 1));
  profile.wall_ms = wall_ms * per_step;
  std::vector<std::string> names;
  std::vector<TimedEvent> timed;
  for (const auto& event : result->events()) {
    if (event.deviceType() != (cpu_ ? c10::DeviceType::CPU : c10::DeviceType::CUDA)) continue;
    names.push_back(event.name());
    timed.push_back({event.startThreadId(), event.startNs(), event.startNs() + event.durationNs()});
  }
  // A GPU kernel runs alone; a CPU operator's time includes the operators it called.
  std::vector<double> ns(timed.size());
  if (cpu_) {
    ns = self_times_ns(timed);
  } else {
    for (size_t i = 0; i < timed.size(); ++i)
      ns[i] = static_cast<double>(timed[i].end_ns - timed[i].start_ns);
  }
  std::map<std::string, KernelTime> by_name;
  for (size_t i = 0; i < names.size(); ++i) {
    const double ms = ns[i] / 1e6 * per_step;
    KernelTime& k = by_name[names[i]];
    k.ms += ms;
    k.calls += per_step;
    profile.busy_ms += ms;
  }
  for (auto& [name, k] : by_name) {
    k.name = name;
    k.kind = cpu_ ? operator_kind(name) : kernel_kind(name);
    profile.kind_ms[k.kind] += k.ms;
    profile.kernels.push_back(k);
  }
  std::sort(profile.kernels.begin(), profile.kernels.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return profile;
}

#else

void require_kernel_profiler() {
  throw UsageError("--kernels needs LibTorch 2.x (its Kineto profiler); this build has LibTorch " +
                   std::string(TORCH_VERSION));
}

void KernelProfiler::start(bool) { require_kernel_profiler(); }

KernelProfile KernelProfiler::stop(int64_t, double) { return {}; }

#endif

}  // namespace causal
