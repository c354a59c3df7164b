// A whole training job; the CLI's `train` command is a thin call into this.
#include "run/train_run.h"

#include <torch/utils.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <optional>

#include "bench/inspect.h"
#include "bench/matmul_peak.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/forensics_bundle.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/runtime.h"
#include "dist/sharded_batches.h"
#include "io/run_files.h"
#include "model/autocast_scope.h"
#include "model/count_parameters.h"
#include "model/transformer.h"
#include "run/interrupt.h"
#include "run/rank_context.h"
#include "run/run_folder.h"
#include "run/worker_output.h"
#include "task/task.h"
#include "train/optimizer.h"
#include "train/trainer.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// The memory split and cost figures (docs/background.md), once at start-up.
void log_cost_plan(spdlog::logger& log, const InspectReport& r, const MatmulPeak& peak) {
  constexpr double kMiB = 1024.0 * 1024.0;
  log.info(
      "memory: parameters {:.2f} MiB, gradients {:.2f} MiB, AdamW state {:.2f} MiB, activations ~{:.1f} MiB "
      "per micro-batch of {} x {} (estimate), KV cache for one sequence of {} positions {:.2f} MiB",
      r.memory.parameters / kMiB, r.memory.gradients / kMiB, r.memory.optimizer / kMiB,
      r.memory.activations / kMiB, r.batch, r.flops.context, r.model.max_seq_len,
      kv_cache_bytes(1, r.model.n_layers, r.model.max_seq_len, r.model.n_kv_heads, r.model.head_dim(), 4) /
          kMiB);
  log.info(
      "cost: {:.3g} training FLOPs per token (6N + causal attention); matmul peak {:.1f} GFLOP/s ({}); "
      "compute-optimal data ~{} tokens (20 per parameter)",
      static_cast<double>(r.flops.training_causal), peak.flops / 1e9, peak.source,
      r.scaling.compute_optimal_tokens);
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

nlohmann::json final_results(double initial_loss, const nlohmann::json& evaluation,
                             const TrainSummary& summary, const RunFolder& folder,
                             const std::string& checkpoint) {
  nlohmann::json results;
  results["initial_loss"] = initial_loss;
  results.update(evaluation);
  results["steps"] = summary.progress.step;
  results["skipped_steps"] = summary.progress.skipped_steps;
  results["tokens_seen"] = summary.progress.tokens_seen;
  results["final_train_loss"] = summary.final_loss;
  results["train_seconds"] = summary.seconds;
  results["tokens_per_s"] = summary.tokens_per_s;
  results["diagnostics_seconds"] = summary.diagnostics_seconds;
  results["run_dir"] = folder.path().string();
  results["checkpoint"] = checkpoint;
  return results;
}

TrainOutcome finished_outcome(std::string run_dir, std::string checkpoint, nlohmann::json results) {
  TrainOutcome outcome;
  outcome.run_dir = std::move(run_dir);
  outcome.checkpoint = std::move(checkpoint);
  outcome.already_finished = true;
  outcome.results = std::move(results);
  return outcome;
}

// One training job, in the order it happens: choose the folder and the start -> open the task and check
// it -> build the model, trainer and checkpointer -> restore or initialise -> train -> finish. Only the
// leader (rank 0, or the single process) has a run folder; the other ranks train and write nothing.
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
    choose_start();
    open_task();
    if (std::optional<TrainOutcome> done = finished_already()) return *done;
    prepare_folder();
    build();
    restore_or_initialise();
    train();
    return finish();
  }

 private:
  // The folder (locked before its checkpoints are read: another process may be writing them), the
  // checkpoint every rank starts from, and the CPU thread split.
  void choose_start() {
    if (ranks_.leader()) plan_ = plan_start(request_.start, config_json_);
    if (!plan_.continue_in.empty()) folder_ = RunFolder::open_existing(plan_.continue_in);
    if (!plan_.restart_in.empty()) {
      folder_ = RunFolder::open_existing(plan_.restart_in);
      const fs::path checkpoints = folder_->path() / run_files::kCheckpoints;
      remove_stale_temporaries(checkpoints);
      if (fs::is_directory(checkpoints) && latest_valid_checkpoint(checkpoints)) {
        throw RunFolderError("run folder " + plan_.restart_in.string() +
                             " received a checkpoint while this run was starting; run the command again");
      }
    }
    from_ = ranks_.share_start(checkpoint_to_continue(plan_));
    check_stop_at_step(request_, steps_, from_);
    // Chosen once, before this process loads the cores itself; a resumed run keeps the one it was
    // trained with.
    const bool keep_checkpoint_split = from_ && from_->state.threads && config_.threads == 0 &&
                                       from_->state.world_size == ranks_.world_size();
    threads_ = keep_checkpoint_split ? ThreadChoice{*from_->state.threads, "as the checkpoint was trained"}
                                     : RankContext::thread_split(config_.threads);
    apply_thread_split(threads_.split);
  }

  // The data, the model's cost against this machine's memory and disk, and the checkpoint against the
  // config: all before any folder is written or tensor allocated.
  void open_task() {
    task_ = make_task(config_, device_, TaskScope::kTraining);
    cost_ = inspect_model(config_.model, task_->sequence_length(), config_.train.batch_size);
    if (device_.is_cpu()) check_training_memory(cost_, physical_memory_bytes(), "this machine");
    // Checkpoints are the run's only large files: a fresh run keeps keep_checkpoints of them plus the one
    // being written; a continued run already holds its own. 1 MiB covers logs and metrics.
    const int64_t checkpoint_bytes = cost_.memory.parameters + cost_.memory.optimizer + (64 << 10);
    const int64_t count = folder_ ? 1 : config_.train.keep_checkpoints + 1;
    const fs::path out = folder_ ? folder_->path()
                         : !request_.start.run_dir.empty()
                             ? fs::path(request_.start.run_dir)
                             : fs::path(request_.start.runs_root) / config_.name;
    RunFolder::check_writable(out, count * checkpoint_bytes + (1 << 20));
    if (from_) check_resumable(*from_, config_json_, task_->identity(), folder_ ? &folder_->log() : nullptr);
  }

  std::optional<TrainOutcome> finished_already() {
    if (!from_) return std::nullopt;
    if (std::optional<nlohmann::json> results = finished_results(plan_, *from_, steps_)) {
      folder_->log().info(
          "run {} already finished at step {}; nothing to do (--resume never starts a new run)",
          plan_.continue_in.string(), from_->state.step);
      if (request_.print_table) std::cout << task_->results_table(*results) << std::flush;
      return finished_outcome(plan_.continue_in.string(), from_->dir.string(), *results);
    }
    if (!ranks_.leader() && from_->state.step >= steps_) return finished_outcome("", from_->dir.string(), {});
    return std::nullopt;
  }

  // The leader's folder: created for a new run; for a continued one, newer invalid checkpoints set aside
  // and the metrics of steps to be repeated dropped; then the config and the task's files.
  void prepare_folder() {
    if (!ranks_.leader()) return;
    peak_ = matmul_peak(device_,
                        products_dtype(config_.model.autocast));  // a bad inherited value: before any write
    if (!folder_) folder_ = RunFolder::create(request_.start.run_dir, request_.start.runs_root, config_.name);
    if (from_ && !plan_.continue_in.empty()) {
      const std::vector<std::string> set_aside =
          set_aside_invalid_after(plan_.continue_in / run_files::kCheckpoints, from_->dir);
      if (!set_aside.empty()) {
        std::string list;
        for (const std::string& item : set_aside) list += (list.empty() ? "" : "; ") + item;
        folder_->log().warn("falling back to {}: newer checkpoint(s) invalid, renamed to invalid-step_*: {}",
                            from_->dir.string(), list);
      }
      folder_->truncate_metrics_after(from_->state.step);
    }
    if (!plan_.restart_in.empty()) {
      folder_->clear_metrics();
      folder_->log().info(
          "restarting {} at step 0: it holds this run's config and no checkpoint (stopped before its first "
          "one); log.txt continues, metrics.jsonl starts again",
          folder_->path().string());
    }
    task_files_ = task_->run_files();
    folder_->write_json(run_files::kConfig, config_json_);
    for (const auto& [name, bytes] : task_files_) folder_->write_file(name, bytes);
  }

  TrainOutput& output() { return folder_ ? static_cast<TrainOutput&>(*folder_) : worker_output_; }

  void build() {
    spdlog::logger& log = output().log();
    torch::manual_seed(static_cast<uint64_t>(config_.seed));
    model_ = Transformer(config_.model);
    model_->to(device_);
    if (folder_) {
      log.info("run folder {}: {} parameters; {}; device {}, {} ({})", folder_->path().string(),
               count_parameters(*model_), task_->describe(), device_.str(), threads_.split.describe(),
               threads_.why);
    }
    log_cost_plan(log, cost_, peak_);

    shard_.emplace(task_->training_batches(), ranks_.rank(), ranks_.world_size());
    BatchSource& batches =
        ranks_.distributed() ? static_cast<BatchSource&>(*shard_) : task_->training_batches();
    trainer_.emplace(config_, model_, batches, output(), device_);
    const std::optional<std::string> recorded_kernel = from_ ? from_->state.optimizer_kernel : std::nullopt;
    const OptimizerKernel kernel =
        kernel_for_run(config_.train.optimizer.kernel, from_.has_value(), recorded_kernel, device_);
    set_adamw_kernel(trainer_->optimizer(), kernel);
    if (ranks_.leader() && recorded_kernel && *recorded_kernel != to_string(kernel)) {
      log.warn(
          "the checkpoint was trained with the {} AdamW kernel and continues with the {} one: the steps "
          "agree to float32 rounding, no longer bit for bit (train.optimizer.kernel, docs/config.md)",
          *recorded_kernel, to_string(kernel));
    }
    trainer_->set_flops(static_cast<double>(cost_.flops.training_causal), peak_.flops);
    trainer_->set_data_parallel(ranks_.parallel());
    if (!request_.inject_fault.empty()) fault_ = FaultInjection::parse(request_.inject_fault);
    trainer_->set_fault(fault_);
    if (!folder_) return;
    CheckpointerOptions checkpointing{config_.train.checkpoint_every, config_.train.keep_checkpoints};
    if (fault_.kind == FaultInjection::Kind::kSave) {
      checkpointing.during_write = [fault = fault_](const fs::path& dir, int64_t step) {
        apply_save_fault(fault, dir, step);
      };
    }
    checkpointer_.emplace(folder_->path() / run_files::kCheckpoints, checkpointing, *model_,
                          trainer_->optimizer(), config_json_, log, from_ ? from_->dir : fs::path());
    checkpointer_->set_extra_files(task_files_);
  }

  // From the checkpoint (weights, optimizer, data position, spike history, RNG) or from step 0; every rank
  // then holds the leader's weights.
  void restore_or_initialise() {
    spdlog::logger& log = output().log();
    if (from_) {
      load_model_weights(from_->dir, *model_);
      load_optimizer_state(from_->dir, *model_, trainer_->optimizer());
      // An import without data starts its data from the beginning, and measures its initial loss on it.
      const bool awaiting = awaits_data(from_->state);
      if (!awaiting) task_->training_batches().restore(from_->state.data);
      trainer_->spike_detector().restore(from_->state.spike_detector);
      start_ = {from_->state.step, from_->state.tokens_seen, from_->state.skipped_steps,
                from_->state.consecutive_skips};
      initial_loss_ = awaiting ? task_->initial_loss(model_) : from_->state.initial_loss;
      restore_global_rng(from_->state.rng, device_);  // last: nothing after it may draw random numbers
      log.info("resuming from {} (step {} of {})", from_->dir.string(), start_.step, steps_);
      if (ranks_.leader()) log_world_change(log, *from_, ranks_.world_size());
    } else {
      initial_loss_ = task_->initial_loss(model_);
      if (request_.start.resume == "auto") log.info("no checkpoint to resume: starting at step 0");
    }
    if (!ranks_.distributed() || start_.step >= steps_) return;
    std::vector<at::Tensor> tensors = model_->parameters();
    for (const at::Tensor& b : model_->buffers()) tensors.push_back(b);
    ranks_.parallel()->broadcast_and_verify(tensors, "model weights");
    ranks_.parallel()->take_seconds();  // set-up, not the first step's all-reduce
    log.info(
        "data-parallel: rank {} of {} ({}), {} rows of each micro-batch of {}, {} gradient buckets "
        "(dist.bucket_mb {}) all-reduced as backward completes them",
        ranks_.rank(), ranks_.world_size(), ranks_.backend(), config_.train.batch_size / ranks_.world_size(),
        config_.train.batch_size, ranks_.parallel()->bucket_count(), config_.dist.bucket_mb);
  }

  TrainingState training_state(const TrainProgress& progress) {
    TrainingState state;
    state.step = progress.step;
    state.tokens_seen = progress.tokens_seen;
    state.skipped_steps = progress.skipped_steps;
    state.consecutive_skips = progress.consecutive_skips;
    state.initial_loss = initial_loss_;
    state.data = task_->training_batches().state();
    state.data_identity = task_->identity();
    state.rng = capture_global_rng(device_);
    state.spike_detector = trainer_->spike_detector().state();
    state.world_size = ranks_.world_size();
    state.threads = threads_.split;
    state.optimizer_kernel = to_string(adamw_kernel(trainer_->optimizer()));
    return state;
  }

  // A checkpoint after every step the checkpointer asks for; a signal or --stop-at-step ends the loop
  // after its step (on every rank together), and a non-finite step leaves a forensics bundle.
  void train() {
    InterruptGuard interrupts;
    TrainHooks hooks;
    if (ranks_.leader())
      hooks.evaluate = [&](Transformer& m, int64_t) { return task_->evaluate_validation(m); };
    hooks.after_step = [&](const TrainProgress& p) {
      signal_ = interrupts.pending();
      if (ranks_.distributed()) signal_ = static_cast<int>(ranks_.parallel()->max_over_ranks(signal_));
      stopped_ = p.step == request_.stop_at_step;
      // metrics.jsonl or log.txt could not be written (full disk, I/O error): a last checkpoint, then stop.
      const bool write_failed = folder_ && !folder_->write_failure().empty();
      if (checkpointer_) {
        try {
          checkpointer_->save(
              p.step, p.step == steps_, [&] { return training_state(p); },
              signal_ || stopped_ || write_failed);
        } catch (const CheckpointError& e) {
          if (write_failed) folder_->throw_write_failure(p.step, std::string("no checkpoint: ") + e.what());
          throw;
        }
      }
      return !signal_ && !stopped_ && !write_failed;
    };
    if (ranks_.leader()) {
      hooks.on_abort = [&](const AbortedStep& step) {
        const ForensicsBundle bundle{step.step,
                                     step.lr,
                                     step.message,
                                     *step.micro_batches,
                                     step.rng_before,
                                     fault_.kind == FaultInjection::Kind::kNone ? "" : fault_.describe(),
                                     checkpointer_->last().string(),
                                     config_json_,
                                     threads_.split};
        const fs::path dir = write_forensics(folder_->path(), bundle, *model_, trainer_->optimizer());
        return "; forensics in " + dir.string() + " (replay: causal train --replay " + dir.string() + ")";
      };
    }
    summary_ = trainer_->run(start_, hooks);
  }

  // A stop by signal throws InterruptedRun; --stop-at-step returns with its checkpoint; a completed run is
  // evaluated on the held-out split and writes results.json (the leader's; other ranks return empty).
  TrainOutcome finish() {
    spdlog::logger& log = output().log();
    const int64_t step = summary_.progress.step;
    TrainOutcome outcome;
    outcome.checkpoint = checkpointer_ ? checkpointer_->last().string() : std::string();
    if (folder_ && !folder_->write_failure().empty())
      folder_->throw_write_failure(step, "checkpoint " + outcome.checkpoint);
    if (signal_) {
      const std::string name = signal_ == SIGINT ? "SIGINT" : "SIGTERM";
      log.warn("{} received: stopped after step {}; checkpoint {}", name, step, outcome.checkpoint);
      throw InterruptedRun(name + ": stopped after step " + std::to_string(step) + ", checkpoint " +
                               outcome.checkpoint + "; run the same command to continue",
                           128 + signal_);
    }
    if (folder_) outcome.run_dir = folder_->path().string();
    if (stopped_) {
      if (folder_)
        log.info("stopped after step {} (--stop-at-step); checkpoint {}", step, outcome.checkpoint);
      outcome.stopped_at_step = step;
      return outcome;
    }
    if (!folder_) return TrainOutcome{};

    const nlohmann::json evaluation = task_->evaluate(model_);
    outcome.results = final_results(initial_loss_, evaluation, summary_, *folder_, outcome.checkpoint);
    if (ranks_.distributed()) {
      outcome.results["world_size"] = ranks_.world_size();
      outcome.results["allreduce_seconds"] = summary_.allreduce_seconds;
    }
    nlohmann::json eval_row = evaluation;
    eval_row["kind"] = "eval";
    eval_row["step"] = step;
    folder_->append_metrics(eval_row);
    if (!folder_->write_failure().empty())
      folder_->throw_write_failure(step, "checkpoint " + outcome.checkpoint);
    folder_->write_json(run_files::kResults, outcome.results);
    log.info(
        "trained to step {} in {:.2f}s ({:.0f} tokens/s; health figures, spike scores and metrics rows took "
        "{:.1f}% of it); results in {}",
        step, summary_.seconds, summary_.tokens_per_s,
        summary_.seconds > 0 ? 100.0 * summary_.diagnostics_seconds / summary_.seconds : 0.0,
        (folder_->path() / run_files::kResults).string());
    if (request_.print_table) std::cout << task_->results_table(outcome.results) << std::flush;
    return outcome;
  }

  const RunConfig& config_;
  const TrainRequest& request_;
  const c10::Device device_;
  const nlohmann::json config_json_;
  const int64_t steps_;
  // A single process unless launched with RANK/WORLD_SIZE; then rank 0 alone picks and writes the run
  // folder, and the other ranks start from the checkpoint it chose.
  RankContext ranks_;

  StartPlan plan_;
  std::unique_ptr<RunFolder> folder_;  // the leader's
  std::optional<CheckpointInfo> from_;
  ThreadChoice threads_;
  std::unique_ptr<Task> task_;
  InspectReport cost_;
  MatmulPeak peak_;
  std::map<std::string, std::string> task_files_;  // written into the folder and every checkpoint
  WorkerOutput worker_output_{ranks_.rank()};

  Transformer model_{nullptr};
  std::optional<ShardedBatches> shard_;
  std::optional<Trainer> trainer_;
  FaultInjection fault_;
  std::optional<Checkpointer> checkpointer_;

  TrainProgress start_;
  double initial_loss_ = 0.0;
  TrainSummary summary_;
  int signal_ = 0;
  bool stopped_ = false;
};

}  // namespace

TrainOutcome train_run(const RunConfig& config, const TrainRequest& request) {
  return TrainJob(config, request).run();
}

}  // namespace causal
