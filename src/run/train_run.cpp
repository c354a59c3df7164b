// A whole training job; the CLI's `train` command is a thin call into this.
#include "run/train_run.h"

#include <spdlog/logger.h>
#include <torch/utils.h>

#include <csignal>
#include <memory>
#include <optional>

#include "bench/inspect.h"
#include "checkpoint/resume.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/runtime.h"
#include "dist/sharded_batches.h"
#include "model/count_parameters.h"
#include "model/lora.h"
#include "model/transformer.h"
#include "model/weight_init.h"
#include "run/interrupt.h"
#include "run/rank_context.h"
#include "run/rank_output.h"
#include "run/rank_start.h"
#include "task/task.h"
#include "train/optimizer.h"
#include "train/trainer.h"

namespace causal {
namespace {

// The memory split and cost figures (docs/background.md), once at start-up.
void log_cost_plan(spdlog::logger& log, const InspectReport& r, const MatmulPeak& peak) {
  constexpr double kMiB = 1024.0 * 1024.0;
  log.info(
      "memory: parameters {:.2f} MiB, gradients {:.2f} MiB, AdamW state {:.2f} MiB (of what trains), "
      "activations ~{:.1f} MiB "
      "per micro-batch of {} x {} (estimate), KV cache for one sequence of {} positions {:.2f} MiB",
      r.memory.parameters / kMiB, r.memory.gradients / kMiB, r.memory.optimizer / kMiB,
      r.memory.activations / kMiB, r.batch, r.flops.context, r.model.max_seq_len,
      kv_cache_bytes(1, r.model.n_layers, r.model.max_seq_len, r.model.n_kv_heads, r.model.head_dim(), 4) /
          kMiB);
  log.info(
      "cost: {:.3g} training FLOPs per token ({}); matmul peak {:.1f} GFLOP/s ({}); "
      "compute-optimal data ~{} tokens (20 per parameter)",
      static_cast<double>(r.flops.training_causal),
      r.lora.rank > 0 ? "6N + causal attention, less the frozen weights' gradients" : "6N + causal attention",
      peak.flops / 1e9, peak.source, r.scaling.compute_optimal_tokens);
}

// A checkpoint written by another number of ranks continues the same global batch sequence (every rank
// draws the global batches; only the split of each one changes): say so, since the floating-point sums
// over ranks, and so the last bits of the weights, differ from an uninterrupted run.
void log_world_change(spdlog::logger& log, const CheckpointInfo& from, int64_t world_size) {
  if (from.state.world_size == world_size) return;
  log.warn(
      "resuming on {} ranks a checkpoint written by {}: the global batches and their order continue "
      "unchanged; each is now split {} ways",
      world_size, from.state.world_size, world_size);
}

void check_stop_at_step(const TrainRequest& request, int64_t steps,
                        const std::optional<CheckpointInfo>& from) {
  if (request.stop_at_step < 0 || request.stop_at_step > steps) {
    throw UsageError("--stop-at-step " + std::to_string(request.stop_at_step) +
                     " is outside 1..train.steps (" + std::to_string(steps) + ")");
  }
  if (from && request.stop_at_step > 0 && request.stop_at_step <= from->state.step) {
    throw UsageError("--stop-at-step " + std::to_string(request.stop_at_step) +
                     ": the run continues after step " + std::to_string(from->state.step));
  }
}

// What each phase of a TrainJob hands to the next.
struct Start {
  std::unique_ptr<RankStart> rank;  // the leader's plan and folder, or another rank's part
  // The checkpoint every rank starts from, as the leader chose it; nullopt: step 0.
  std::optional<CheckpointInfo> from;
  ThreadChoice threads;  // this process's CPU threads, applied
};

struct OpenedTask {
  std::unique_ptr<Task> task;
  InspectReport cost;  // the model's memory and FLOPs at the task's sequence length
};

struct Built {
  Transformer model{nullptr};          // on the device, initialised from config.seed
  std::optional<BaseCheckpoint> base;  // an adapter run's frozen base, which its checkpoints name
  // This rank's rows of each global batch; the trainer reads them in a data-parallel run, else the task's.
  // On the heap: the trainer refers to them, and a Built is moved.
  std::unique_ptr<ShardedBatches> shard;
  std::unique_ptr<Trainer> trainer;
  FaultInjection fault;  // --inject-fault (kNone without)
};

struct Resumed {
  TrainProgress progress;  // where the loop starts
  double initial_loss = 0.0;
};

struct Trained {
  TrainSummary summary;
  std::string checkpoint;  // the run's newest ("" on ranks other than the leader)
  int signal = 0;          // SIGINT or SIGTERM, received by any rank, that ended the loop (0: none)
  bool stopped = false;    // --stop-at-step ended the loop
};

// One training job, in the order it happens: choose the start -> open the task and check it -> prepare
// what this rank writes -> build the model and trainer -> restore or initialise -> train -> finish. Only
// the leader (rank 0, or the single process) has a run folder. Whether this process leads is decided once
// (start_rank); from there each phase asks the RankStart, RankOutput or RankLoop the one before made.
class TrainJob {
 public:
  TrainJob(const RunConfig& config, const TrainRequest& request)
      : config_(config),
        request_(request),
        device_(resolve_device(config.device)),
        config_json_(config_to_json(config)),
        steps_(config.train.steps),
        ranks_(config, device_) {}

  TrainOutcome run() {
    check_stop_at_step(request_, steps_, std::nullopt);
    Start start = choose_start();
    OpenedTask opened = open_task(start);
    if (std::optional<TrainOutcome> done = finished_already(start, opened)) return *done;
    const std::unique_ptr<RankOutput> output = start.rank->prepare(start.from, *opened.task);
    Built built = build(start, opened, *output);
    const Resumed resumed = restore_or_initialise(start, opened, built, *output);
    const Trained trained = train(start, opened, built, resumed, *output);
    return finish(built, resumed, trained, *output);
  }

 private:
  // The leader's plan and folder, the checkpoint every rank starts from, and the CPU thread split.
  Start choose_start() {
    Start start;
    start.rank = start_rank(ranks_, config_, request_, config_json_, device_);
    start.from = ranks_.share_start(start.rank->checkpoint());
    check_stop_at_step(request_, steps_, start.from);
    // Chosen once, before this process loads the cores itself; a resumed run keeps the one it was
    // trained with.
    const std::optional<CheckpointInfo>& from = start.from;
    const bool keep_checkpoint_split =
        from && from->state.threads && config_.threads == 0 && from->state.world_size == ranks_.world_size();
    start.threads = keep_checkpoint_split
                        ? ThreadChoice{*from->state.threads, "as the checkpoint was trained"}
                        : RankContext::thread_split(config_.threads);
    apply_thread_split(start.threads.split);
    return start;
  }

  // The data, the model's cost against this machine's memory and disk, and the checkpoint against the
  // config: all before any folder is written or tensor allocated.
  OpenedTask open_task(const Start& start) {
    OpenedTask opened{make_task(config_, device_, TaskScope::kTraining), {}};
    opened.cost = inspect_model(config_.model, opened.task->sequence_length(), config_.train.batch_size,
                                "fp32", config_.train.lora);
    if (device_.is_cpu()) check_training_memory(opened.cost, physical_memory_bytes(), "this machine");
    start.rank->check_writable(opened.cost.memory.parameters + opened.cost.memory.optimizer + (64 << 10));
    if (start.from) {
      check_resumable(*start.from, config_json_, opened.task->identity(), start.rank->resume_log());
    }
    return opened;
  }

  std::optional<TrainOutcome> finished_already(const Start& start, const OpenedTask& opened) {
    if (!start.from) return std::nullopt;
    return start.rank->finished(*start.from, *opened.task);
  }

  Built build(const Start& start, OpenedTask& opened, RankOutput& output) {
    Task& task = *opened.task;
    Built built;
    torch::manual_seed(static_cast<uint64_t>(config_.seed));
    const LoraConfig& lora = config_.train.lora;
    {
      // An adapter run's base comes whole from its checkpoint: its product weights are neither drawn nor
      // resident before the load writes them (model/weight_init.h).
      const SkipWeightInit loaded_next(lora.enabled());
      built.model = Transformer(config_.model);
    }
    built.model->to(device_);
    if (lora.enabled()) {
      if (!start.from)
        throw ConfigError("config", "train.lora.rank",
                          "adapters train on the weights of a base model, and this run starts from random "
                          "ones: continue an imported or trained run (--run-dir RUN --resume auto, or "
                          "--resume RUN --run-dir NEW; docs/finetune.md)");
      const bool blocks = lora.base_dtype != BaseDtype::kF32 && lora.base_dtype != BaseDtype::kBf16;
      if (blocks && !device_.is_cpu())
        throw ConfigError("config", "train.lora.base_dtype",
                          "\"" + to_string(lora.base_dtype) +
                              "\" blocks are dequantized by the CPU, and this run "
                              "trains on " +
                              device_.str() + ": there it takes \"bf16\" or \"f32\" (docs/finetune.md)");
      built.base = base_of(start.from->dir, start.from->state.base);
      const std::vector<std::string> adapted = attach_lora(*built.model, lora);
      output.run_log().info(
          "LoRA r {} alpha {} on {} products ({} ...); base {} frozen, its product weights held in {}; {} of "
          "{} parameters train",
          lora.rank, lora.alpha, adapted.size(), adapted.front(), built.base->dir.string(),
          to_string(lora.base_dtype), count_parameters(*built.model, /*trainable_only=*/true),
          count_parameters(*built.model));
    }
    output.run_log().info("run folder {}: {} parameters; {}; device {}, {} ({})", output.run_dir(),
                          count_parameters(*built.model), task.describe(), device_.str(),
                          start.threads.split.describe(), start.threads.why);
    log_cost_plan(output.log(), opened.cost, output.peak());

    built.shard =
        std::make_unique<ShardedBatches>(task.training_batches(), ranks_.rank(), ranks_.world_size());
    BatchSource& batches =
        ranks_.distributed() ? static_cast<BatchSource&>(*built.shard) : task.training_batches();
    built.trainer = std::make_unique<Trainer>(config_, built.model, batches, output, device_);
    const std::optional<std::string> recorded_kernel =
        start.from ? start.from->state.optimizer_kernel : std::nullopt;
    const OptimizerKernel kernel =
        kernel_for_run(config_.train.optimizer.kernel, start.from.has_value(), recorded_kernel, device_);
    set_adamw_kernel(built.trainer->optimizer(), kernel);
    if (recorded_kernel && *recorded_kernel != to_string(kernel)) {
      output.run_log().warn(
          "the checkpoint was trained with the {} AdamW kernel and continues with the {} one: the steps "
          "agree to float32 rounding, no longer bit for bit (train.optimizer.kernel, docs/config.md)",
          *recorded_kernel, to_string(kernel));
    }
    built.trainer->set_flops(static_cast<double>(opened.cost.flops.training_causal), output.peak().flops);
    built.trainer->set_data_parallel(ranks_.parallel());
    if (!request_.inject_fault.empty()) built.fault = FaultInjection::parse(request_.inject_fault);
    built.trainer->set_fault(built.fault);
    return built;
  }

  // From the checkpoint (weights, optimizer, data position, spike history, RNG) or from step 0; every rank
  // then holds the leader's weights.
  Resumed restore_or_initialise(const Start& start, OpenedTask& opened, Built& built, RankOutput& output) {
    spdlog::logger& log = output.log();
    Task& task = *opened.task;
    Resumed resumed;
    if (start.from) {
      const CheckpointInfo& from = *start.from;
      // The base, float32 as loaded, held in train.lora.base_dtype a weight at a time as it is read: each
      // start quantizes the same values the same way, so a resumed run computes with the same base bits.
      const TensorRead hold =
          built.base ? hold_each_loaded(*built.model, config_.train.lora.base_dtype) : TensorRead{};
      if (built.base && !from.state.base) {
        // An adapter run's first start on a full checkpoint: its weights become the frozen base, the
        // adapters keep their fresh init and AdamW starts with them.
        load_frozen_weights(from.dir, *built.model, hold);
        reset_dora_magnitudes(*built.model);
      } else {
        load_model_weights(from, *built.model, hold);
        load_optimizer_state(from.dir, *built.model, built.trainer->optimizer());
      }
      // An import without data starts its data from the beginning, and measures its initial loss on it.
      const bool awaiting = awaits_data(from.state);
      if (!awaiting) task.training_batches().restore(from.state.data);
      built.trainer->spike_detector().restore(from.state.spike_detector);
      resumed.progress = {from.state.step, from.state.tokens_seen, from.state.skipped_steps,
                          from.state.consecutive_skips};
      resumed.initial_loss = awaiting ? task.initial_loss(built.model) : from.state.initial_loss;
      restore_global_rng(from.state.rng, device_);  // last: nothing after it may draw random numbers
      log.info("resuming from {} (step {} of {})", from.dir.string(), resumed.progress.step, steps_);
      log_world_change(output.run_log(), from, ranks_.world_size());
    } else {
      resumed.initial_loss = task.initial_loss(built.model);
      if (request_.start.resume == "auto") log.info("no checkpoint to resume: starting at step 0");
    }
    if (!ranks_.distributed() || resumed.progress.step >= steps_) return resumed;
    std::vector<at::Tensor> tensors = built.model->parameters();
    for (const at::Tensor& b : built.model->buffers()) tensors.push_back(b);
    ranks_.parallel()->broadcast_and_verify(tensors, "model weights");
    ranks_.parallel()->take_seconds();  // set-up, not the first step's all-reduce
    log.info(
        "data-parallel: rank {} of {} ({}), {} rows of each micro-batch of {}, {} gradient buckets "
        "(dist.bucket_mb {}) of {} values in all, all-reduced as backward completes them",
        ranks_.rank(), ranks_.world_size(), ranks_.backend(), config_.train.batch_size / ranks_.world_size(),
        config_.train.batch_size, ranks_.parallel()->bucket_count(), config_.dist.bucket_mb,
        ranks_.parallel()->reduced_elements());
    return resumed;
  }

  TrainingState training_state(const TrainProgress& progress, const Start& start, Task& task,
                               Trainer& trainer, const Resumed& resumed,
                               const std::optional<BaseCheckpoint>& base) const {
    TrainingState state;
    state.base = base;
    state.step = progress.step;
    state.tokens_seen = progress.tokens_seen;
    state.skipped_steps = progress.skipped_steps;
    state.consecutive_skips = progress.consecutive_skips;
    state.initial_loss = resumed.initial_loss;
    state.data = task.training_batches().state();
    state.data_identity = task.identity();
    state.rng = capture_global_rng(device_);
    state.spike_detector = trainer.spike_detector().state();
    state.world_size = ranks_.world_size();
    state.threads = start.threads.split;
    state.optimizer_kernel = to_string(adamw_kernel(trainer.optimizer()));
    return state;
  }

  // A checkpoint after every step the leader's checkpointer asks for; a signal or --stop-at-step ends the
  // loop after its step (on every rank together), and a non-finite step leaves a forensics bundle.
  Trained train(const Start& start, OpenedTask& opened, Built& built, const Resumed& resumed,
                RankOutput& output) {
    InterruptGuard interrupts;
    Trainer& trainer = *built.trainer;
    const std::unique_ptr<RankLoop> loop = output.loop(built.model, trainer.optimizer(), start.from,
                                                       built.fault, start.threads.split, built.base);
    Trained trained;
    TrainHooks hooks;
    loop->add_hooks(hooks);
    hooks.after_step = [&](const TrainProgress& p) {
      trained.signal = interrupts.pending();
      if (ranks_.distributed())
        trained.signal = static_cast<int>(ranks_.parallel()->max_over_ranks(trained.signal));
      trained.stopped = p.step == request_.stop_at_step;
      const bool stop = trained.signal || trained.stopped;
      const bool go_on = loop->after_step(
          p, stop, [&] { return training_state(p, start, *opened.task, trainer, resumed, built.base); });
      return go_on && !stop;
    };
    trained.summary = trainer.run(resumed.progress, hooks);
    trained.checkpoint = loop->newest_checkpoint();
    return trained;
  }

  // A stop by signal throws InterruptedRun; --stop-at-step returns with its checkpoint; a completed run is
  // evaluated on the held-out split and writes results.json (the leader's; other ranks return empty).
  TrainOutcome finish(Built& built, const Resumed& resumed, const Trained& trained, RankOutput& output) {
    const int64_t step = trained.summary.progress.step;
    TrainOutcome outcome;
    outcome.checkpoint = trained.checkpoint;
    output.check_writes(step, "checkpoint " + outcome.checkpoint);
    if (trained.signal) {
      const std::string name = trained.signal == SIGINT ? "SIGINT" : "SIGTERM";
      output.log().warn("{} received: stopped after step {}; checkpoint {}", name, step, outcome.checkpoint);
      throw InterruptedRun(name + ": stopped after step " + std::to_string(step) + ", checkpoint " +
                               outcome.checkpoint + "; run the same command to continue",
                           128 + trained.signal);
    }
    outcome.run_dir = output.run_dir();
    if (trained.stopped) {
      output.run_log().info("stopped after step {} (--stop-at-step); checkpoint {}", step,
                            outcome.checkpoint);
      outcome.stopped_at_step = step;
      return outcome;
    }
    return output.complete(std::move(outcome), built.model, resumed.initial_loss, trained.summary, ranks_);
  }

  const RunConfig& config_;
  const TrainRequest& request_;
  const c10::Device device_;
  const nlohmann::json config_json_;
  const int64_t steps_;
  // A single process unless launched with RANK/WORLD_SIZE; then rank 0 alone picks and writes the run
  // folder, and the other ranks start from the checkpoint it chose.
  RankContext ranks_;
};

}  // namespace

TrainOutcome train_run(const RunConfig& config, const TrainRequest& request) {
  return TrainJob(config, request).run();
}

}  // namespace causal
