// The benchmark loop: the trainer's own forward/backward (accumulate_gradients), clipping and AdamW step,
// without its bookkeeping, each phase timed separately.
#include "bench/bench.h"

#include <spdlog/fmt/fmt.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/inspect.h"
#include "bench/matmul_peak.h"
#include "core/runtime.h"
#include "model/autocast_scope.h"
#include "model/transformer.h"
#include "task/task.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/trainer.h"

namespace causal {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct StepTimes {
  double forward = 0.0, backward = 0.0, optimizer = 0.0, total = 0.0;
  int64_t tokens = 0;
};

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

nlohmann::json BenchResult::to_json() const {
  nlohmann::json out{{"ms_per_step", ms_per_step},
                     {"tokens_per_s", tokens_per_s},
                     {"forward_ms", forward_ms},
                     {"backward_ms", backward_ms},
                     {"optimizer_ms", optimizer_ms},
                     {"achieved_gflops", achieved_gflops},
                     {"matmul_peak_gflops", matmul_peak_gflops},
                     {"mfu", mfu},
                     {"peak_rss_mib", peak_rss_mib},
                     {"peak_device_mib", peak_device_mib},
                     {"graph_replays", graph_replays},
                     {"graph_failure", graph_failure},
                     {"threads", threads}};
  if (kernels.steps > 0) out["kernels"] = kernels.to_json(kKernelsShown);
  return out;
}

BenchResult run_bench(const RunConfig& config, const BenchOptions& options) {
  BenchResult result;
  result.thread_choice = choose_thread_split(config.threads, machine_cores());
  apply_thread_split(result.thread_choice.split);
  result.threads = std::max(result.thread_choice.split.aten, result.thread_choice.split.blas);
  const c10::Device device = resolve_device(config.device);
  std::unique_ptr<Task> task = make_task(config, device, TaskScope::kTraining);
  // Before the model is built: a model that cannot fit is refused with its estimate (as `train` does).
  const InspectReport cost = inspect_model(config.model, task->sequence_length(), config.train.batch_size);
  if (device.is_cpu()) check_training_memory(cost, physical_memory_bytes(), "this machine");
  torch::manual_seed(static_cast<uint64_t>(config.seed));
  Transformer model(config.model);
  model->to(device);
  model->train();
  auto optimizer = make_adamw(*model, config.train.optimizer);
  if (options.measure_peak) {
    result.matmul_peak_gflops = measure_matmul_peak(device, products_dtype(config.model.autocast)) / 1e9;
  }

  // As `causal train` runs it: from a CUDA graph where it may (train.cuda_graphs), which leaves the forward
  // and backward untimed apart.
  const std::unique_ptr<StepGraph> graph = StepGraph::for_run(config.train, device);
  const auto take_step = [&](int64_t step, StepGraph* step_graph) {
    StepTimes t;
    const auto start = Clock::now();
    set_learning_rate(*optimizer, lr_at(config.train, std::min(step, config.train.steps - 1)));
    std::vector<Batch> micro_batches;
    for (int64_t i = 0; i < config.train.grad_accum; ++i)
      micro_batches.push_back(task->training_batches().next().to(device));
    PhaseTimes phases{device};
    const auto passes = Clock::now();
    t.tokens = accumulate_gradients(model, micro_batches, config.train, /*collect_diagnostics=*/false,
                                    nullptr, step_graph != nullptr ? nullptr : &phases, step_graph)
                   .input_tokens;
    if (step_graph != nullptr) {
      synchronize(device);
      phases.forward_ms = ms_since(passes);
    }
    t.forward = phases.forward_ms;
    t.backward = phases.backward_ms;
    const auto phase = Clock::now();
    clip_gradients(*model, config.train.grad_clip);
    optimizer->step();
    synchronize(device);
    t.optimizer = ms_since(phase);
    t.total = ms_since(start);
    return t;
  };
  std::vector<StepTimes> timed;
  const int64_t total_steps = options.warmup + options.steps;
  int64_t replays_before_timing = 0;
  for (int64_t step = 0; step < total_steps; ++step) {
    if (step == options.warmup && graph != nullptr) replays_before_timing = graph->replays();
    const StepTimes t = take_step(step, graph.get());
    if (step >= options.warmup) timed.push_back(t);
  }
  if (graph != nullptr) {
    result.graph_replays = graph->replays() - replays_before_timing;
    result.graph_failure = graph->disabled_reason();
  }
  if (options.kernel_steps > 0) {
    // Apart from the timed steps: the profiler's own overhead would slow them.
    KernelProfiler profiler;
    profiler.start(device.is_cpu());
    const auto start = Clock::now();
    // Eagerly: the table names each kernel, which a graph's one launch would hide.
    for (int64_t step = total_steps; step < total_steps + options.kernel_steps; ++step)
      take_step(step, nullptr);
    result.kernels = profiler.stop(options.kernel_steps, ms_since(start));
  }

  std::vector<double> total, forward, backward, update, rate;
  for (const StepTimes& t : timed) {
    total.push_back(t.total);
    forward.push_back(t.forward);
    backward.push_back(t.backward);
    update.push_back(t.optimizer);
    rate.push_back(t.total > 0 ? 1000.0 * static_cast<double>(t.tokens) / t.total : 0.0);
  }
  result.ms_per_step = median(total);
  result.forward_ms = median(forward);
  result.backward_ms = median(backward);
  result.optimizer_ms = median(update);
  result.tokens_per_s = median(rate);
  result.achieved_gflops = result.tokens_per_s * static_cast<double>(cost.flops.training_causal) / 1e9;
  result.mfu = result.matmul_peak_gflops > 0 ? result.achieved_gflops / result.matmul_peak_gflops : 0.0;
  result.peak_rss_mib = peak_rss_mib();
  result.peak_device_mib = peak_device_memory_mib(device);
  return result;
}

std::string format_bench(const BenchResult& r, const RunConfig& config) {
  const std::string text = fmt::format(
      "bench {}: {} layers, d_model {}, batch {} x grad_accum {}, {} ({})\n"
      "  ms/step        {:10.2f}   (forward {:.2f}, backward {:.2f}, optimizer {:.2f})\n"
      "  tokens/s       {:10.0f}   (input positions, padding included)\n"
      "  GFLOP/s        {:10.2f}   of a measured matmul peak of {:.2f}: MFU {:.3f}\n"
      "  peak RSS       {:10.1f} MiB\n{}",
      config.name, config.model.n_layers, config.model.d_model, config.train.batch_size,
      config.train.grad_accum, r.thread_choice.split.describe(), r.thread_choice.why, r.ms_per_step,
      r.forward_ms, r.backward_ms, r.optimizer_ms, r.tokens_per_s, r.achieved_gflops, r.matmul_peak_gflops,
      r.mfu, r.peak_rss_mib,
      r.peak_device_mib > 0 ? fmt::format("  peak device    {:10.1f} MiB allocated\n", r.peak_device_mib)
                            : "");
  const std::string graph_line =
      r.graph_replays > 0
          ? fmt::format("  CUDA graph     {:10d} micro-batches replayed (forward includes backward)\n",
                        r.graph_replays)
      : !r.graph_failure.empty() ? "  CUDA graph     capture failed, ran eagerly: " + r.graph_failure + "\n"
                                 : "";
  return r.kernels.steps > 0 ? text + graph_line + r.kernels.format(kKernelsShown) : text + graph_line;
}

}  // namespace causal
