// A whole training job; the CLI's `train` command is a thin call into this.
#include "run/train_run.h"

#include <torch/utils.h>

#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/forensics_bundle.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/runtime.h"
#include "dist/sharded_batches.h"
#include "model/autocast_scope.h"
#include "model/cost_model.h"
#include "model/count_parameters.h"
#include "model/transformer.h"
#include "run/interrupt.h"
#include "run/rank_context.h"
#include "run/run_folder.h"
#include "run/worker_output.h"
#include "task/task.h"
#include "train/throughput.h"
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

// A finished run's results, when `from` is its last checkpoint and results.json is readable.
std::optional<nlohmann::json> finished_results(const StartPlan& plan, const CheckpointInfo& from,
                                               int64_t steps) {
  if (plan.continue_in.empty() || from.state.step != steps) return std::nullopt;
  std::ifstream in(plan.continue_in / "results.json");
  if (!in) return std::nullopt;
  const nlohmann::json results = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (results.is_discarded()) return std::nullopt;
  return results;
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

// A folder killed between RunFolder::create and its config.json: nothing in it but what create made.
bool holds_only_a_new_folder(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == ".lock" || name == "log.txt") continue;
    if (name == "metrics.jsonl" && fs::file_size(entry.path(), ec) == 0) continue;
    return false;
  }
  return !ec;
}

// --resume auto on a run folder (--run-dir, or runs/<name> without it) that holds this very run (config.json
// with the same model, data, seed and name) and no checkpoint at all: the run was killed before its first
// checkpoint (SIGKILL, a cluster's preemption) and starts again there from step 0, so a requeue loop
// converges. nullopt where RunFolder::create decides (empty, absent, not a run folder, finished, holding a
// valid checkpoint, or runs/<name> holding another run: that one gets runs/<name>-N). Throws RunFolderError
// for a --run-dir of another run, and CheckpointError when every checkpoint of this run is invalid.
std::optional<fs::path> restart_folder(const StartPlan& plan, const TrainRequest& request,
                                       const nlohmann::json& config_json, const std::string& name) {
  if (request.resume != "auto" || !plan.continue_in.empty() || plan.fork_from) return std::nullopt;
  const bool named = request.run_dir.empty();
  const fs::path dir = named ? fs::path(request.runs_root) / name : fs::path(request.run_dir);
  if (RunFolder::is_empty_or_absent(dir)) return std::nullopt;
  std::ifstream in(dir / "config.json");
  if (!in) return holds_only_a_new_folder(dir) ? std::optional<fs::path>(dir) : std::nullopt;
  const nlohmann::json stored = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!stored.is_object()) return std::nullopt;
  const std::vector<std::string> differences =
      config_differences(stored, config_json, {"model", "data", "seed", "name"});
  if (!differences.empty()) {
    if (named) return std::nullopt;
    std::string first = differences.front();
    if (const auto at = first.find(": checkpoint "); at != std::string::npos)
      first.replace(at, 13, ": its config.json ");
    throw RunFolderError(
        "run folder " + dir.string() + " holds another run (" + first +
        (differences.size() > 1 ? ", and " + std::to_string(differences.size() - 1) + " more" : "") +
        "); choose another --run-dir (runs are never overwritten)");
  }
  const fs::path checkpoints = dir / "checkpoints";
  // This run's checkpoints, none of them valid: nothing to continue from, and nothing to overwrite.
  if (!newest_checkpoint_problem(checkpoints).empty() && !latest_valid_checkpoint(checkpoints))
    find_checkpoint(dir, "");  // throws, naming why the newest one is invalid
  if (fs::exists(dir / "results.json")) return std::nullopt;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints, ec)) {
    if (entry.path().filename().string().rfind("step_", 0) == 0) return std::nullopt;
  }
  return dir;
}

}  // namespace

TrainOutcome train_run(const RunConfig& config, const TrainRequest& request) {
  const c10::Device device = resolve_device(config.device);
  const nlohmann::json config_json = config_to_json(config);
  const int64_t steps = config.train.steps;
  check_stop_at_step(request, steps, std::nullopt);
  // A single process unless launched with RANK/WORLD_SIZE; then rank 0 alone picks and writes the run
  // folder, and the other ranks start from the checkpoint it chose.
  RankContext ranks(config, device);
  const bool leader = ranks.leader();

  // Lock a folder we continue in before reading its checkpoints: another process may be writing them.
  const StartPlan plan =
      leader ? plan_start({request.resume, request.run_dir, request.runs_root}, config.name, steps)
             : StartPlan{};
  std::unique_ptr<RunFolder> folder;
  if (!plan.continue_in.empty()) folder = RunFolder::open_existing(plan.continue_in);
  const std::optional<fs::path> restart =
      leader ? restart_folder(plan, request, config_json, config.name) : std::nullopt;
  if (restart) {
    folder = RunFolder::open_existing(*restart);  // locked: no other process writes there now
    remove_stale_temporaries(folder->path() / "checkpoints");
    if (fs::is_directory(folder->path() / "checkpoints") &&
        latest_valid_checkpoint(folder->path() / "checkpoints")) {
      throw RunFolderError("run folder " + restart->string() +
                           " received a checkpoint while this run was starting; run the command again");
    }
  }
  const std::optional<CheckpointInfo> from = ranks.share_start(checkpoint_to_continue(plan));
  check_stop_at_step(request, steps, from);
  // Chosen once, before this process loads the cores itself; a resumed run keeps the one it was trained with.
  const bool keep_checkpoint_split =
      from && from->state.threads && config.threads == 0 && from->state.world_size == ranks.world_size();
  const ThreadChoice threads = keep_checkpoint_split
                                   ? ThreadChoice{*from->state.threads, "as the checkpoint was trained"}
                                   : RankContext::thread_split(config.threads);
  apply_thread_split(threads.split);

  std::unique_ptr<Task> task = make_task(config, device, TaskScope::kTraining);
  // Before any folder is written or tensor allocated: a model that cannot fit is refused with its estimate.
  const InspectReport cost = inspect_model(config.model, task->sequence_length(), config.train.batch_size);
  if (device.is_cpu()) check_training_memory(cost, physical_memory_bytes(), "this machine");
  {
    // Checkpoints are the run's only large files: a fresh run keeps keep_checkpoints of them plus the one
    // being written; a continued run already holds its own. 1 MiB covers logs and metrics.
    const int64_t checkpoint_bytes = cost.memory.parameters + cost.memory.optimizer + (64 << 10);
    const int64_t count = folder ? 1 : config.train.keep_checkpoints + 1;
    const fs::path out = folder                     ? folder->path()
                         : !request.run_dir.empty() ? fs::path(request.run_dir)
                                                    : fs::path(request.runs_root) / config.name;
    RunFolder::check_writable(out, count * checkpoint_bytes + (1 << 20));
  }
  if (from) check_resumable(*from, config_json, task->identity(), folder ? &folder->log() : nullptr);
  if (from) {
    if (std::optional<nlohmann::json> results = finished_results(plan, *from, steps)) {
      folder->log().info(
          "run {} already finished at step {}; nothing to do (--resume never starts a new run)",
          plan.continue_in.string(), from->state.step);
      if (request.print_table) std::cout << task->results_table(*results) << std::flush;
      return {plan.continue_in.string(), from->dir.string(), 0, true, *results};
    }
  }
  if (!leader && from && from->state.step >= steps) return {"", from->dir.string(), 0, true, {}};
  const MatmulPeak peak = leader ? matmul_peak(device, products_dtype(config.model.autocast))
                                 : MatmulPeak{};  // a bad inherited value: before any write
  if (leader && !folder) folder = RunFolder::create(request.run_dir, request.runs_root, config.name);
  if (from && !plan.continue_in.empty()) {
    const std::vector<std::string> set_aside =
        set_aside_invalid_after(plan.continue_in / "checkpoints", from->dir);
    if (!set_aside.empty()) {
      std::string list;
      for (const std::string& item : set_aside) list += (list.empty() ? "" : "; ") + item;
      folder->log().warn("falling back to {}: newer checkpoint(s) invalid, renamed to invalid-step_*: {}",
                         from->dir.string(), list);
    }
    folder->truncate_metrics_after(from->state.step);
  }
  if (restart) {
    folder->clear_metrics();
    folder->log().info(
        "restarting {} at step 0: it holds this run's config and no checkpoint (stopped before its first "
        "one); log.txt continues, metrics.jsonl starts again",
        folder->path().string());
  }
  const std::map<std::string, std::string> run_files = task->run_files();
  if (folder) {
    folder->write_json("config.json", config_json);
    for (const auto& [name, bytes] : run_files) folder->write_file(name, bytes);
  }
  WorkerOutput worker_output(ranks.rank());
  TrainOutput& output = folder ? static_cast<TrainOutput&>(*folder) : worker_output;
  auto& log = output.log();

  torch::manual_seed(static_cast<uint64_t>(config.seed));
  Transformer model(config.model);
  model->to(device);
  if (folder) {
    log.info("run folder {}: {} parameters; {}; device {}, {} ({})", folder->path().string(),
             count_parameters(*model), task->describe(), device.str(), threads.split.describe(), threads.why);
  }
  log_cost_plan(log, cost, peak);

  ShardedBatches shard(task->training_batches(), ranks.rank(), ranks.world_size());
  Trainer trainer(config, model, ranks.distributed() ? shard : task->training_batches(), output, device);
  trainer.set_flops(static_cast<double>(cost.flops.training_causal), peak.flops);
  trainer.set_data_parallel(ranks.parallel());
  const FaultInjection fault =
      request.inject_fault.empty() ? FaultInjection{} : FaultInjection::parse(request.inject_fault);
  trainer.set_fault(fault);
  std::optional<Checkpointer> checkpointer;
  if (folder) {
    CheckpointerOptions checkpointing{config.train.checkpoint_every, config.train.keep_checkpoints};
    if (fault.kind == FaultInjection::Kind::kSave)
      checkpointing.during_write = [fault](const fs::path& dir, int64_t step) {
        apply_save_fault(fault, dir, step);
      };
    checkpointer.emplace(folder->path() / "checkpoints", checkpointing, *model, trainer.optimizer(),
                         config_json, log, from ? from->dir : fs::path());
    checkpointer->set_extra_files(run_files);
  }

  TrainProgress start;
  double initial_loss = 0.0;
  if (from) {
    load_model_weights(from->dir, *model);
    load_optimizer_state(from->dir, *model, trainer.optimizer());
    task->training_batches().restore(from->state.data);
    trainer.spike_detector().restore(from->state.spike_detector);
    start = {from->state.step, from->state.tokens_seen, from->state.skipped_steps,
             from->state.consecutive_skips};
    initial_loss = from->state.initial_loss;
    restore_global_rng(from->state.rng, device);  // last: nothing after it may draw random numbers
    log.info("resuming from {} (step {} of {})", from->dir.string(), start.step, steps);
    if (leader) log_world_change(log, *from, ranks.world_size());
  } else {
    initial_loss = task->initial_loss(model);
    if (request.resume == "auto") log.info("no checkpoint to resume: starting at step 0");
  }
  if (ranks.distributed() && start.step < steps) {
    std::vector<at::Tensor> tensors = model->parameters();
    for (const at::Tensor& b : model->buffers()) tensors.push_back(b);
    ranks.parallel()->broadcast_and_verify(tensors, "model weights");
    ranks.parallel()->take_seconds();  // set-up, not the first step's all-reduce
    log.info(
        "data-parallel: rank {} of {} ({}), {} rows of each micro-batch of {}, {} gradient buckets "
        "(dist.bucket_mb {}) all-reduced as backward completes them",
        ranks.rank(), ranks.world_size(), ranks.backend(), config.train.batch_size / ranks.world_size(),
        config.train.batch_size, ranks.parallel()->bucket_count(), config.dist.bucket_mb);
  }

  auto training_state = [&](const TrainProgress& progress) {
    TrainingState state;
    state.step = progress.step;
    state.tokens_seen = progress.tokens_seen;
    state.skipped_steps = progress.skipped_steps;
    state.consecutive_skips = progress.consecutive_skips;
    state.initial_loss = initial_loss;
    state.data = task->training_batches().state();
    state.data_identity = task->identity();
    state.rng = capture_global_rng(device);
    state.spike_detector = trainer.spike_detector().state();
    state.world_size = ranks.world_size();
    state.threads = threads.split;
    return state;
  };

  int signal = 0;
  bool stopped = false;
  TrainSummary summary;
  {
    InterruptGuard interrupts;
    TrainHooks hooks;
    if (leader) hooks.evaluate = [&](Transformer& m, int64_t) { return task->evaluate_validation(m); };
    hooks.after_step = [&](const TrainProgress& p) {
      signal = interrupts.pending();
      // Ranks stop together: a signal that reached any rank stops every one after this step.
      if (ranks.distributed()) signal = static_cast<int>(ranks.parallel()->max_over_ranks(signal));
      stopped = p.step == request.stop_at_step;
      // metrics.jsonl or log.txt could not be written (full disk, I/O error): a last checkpoint, then stop.
      const bool write_failed = folder && !folder->write_failure().empty();
      if (checkpointer) {
        try {
          checkpointer->save(
              p.step, p.step == steps, [&] { return training_state(p); }, signal || stopped || write_failed);
        } catch (const CheckpointError& e) {
          if (write_failed) folder->throw_write_failure(p.step, std::string("no checkpoint: ") + e.what());
          throw;
        }
      }
      return !signal && !stopped && !write_failed;
    };
    if (leader)
      hooks.on_abort = [&](const AbortedStep& step) {
        const ForensicsBundle bundle{step.step,
                                     step.lr,
                                     step.message,
                                     *step.micro_batches,
                                     step.rng_before,
                                     fault.kind == FaultInjection::Kind::kNone ? "" : fault.describe(),
                                     checkpointer->last().string(),
                                     config_json,
                                     threads.split};
        const fs::path dir = write_forensics(folder->path(), bundle, *model, trainer.optimizer());
        return "; forensics in " + dir.string() + " (replay: causal train --replay " + dir.string() + ")";
      };
    summary = trainer.run(start, hooks);
  }
  const TrainProgress& progress = summary.progress;
  const std::string checkpoint = checkpointer ? checkpointer->last().string() : std::string();
  if (folder && !folder->write_failure().empty())
    folder->throw_write_failure(progress.step, "checkpoint " + checkpoint);
  if (signal) {
    const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
    log.warn("{} received: stopped after step {}; checkpoint {}", name, progress.step, checkpoint);
    throw InterruptedRun(name + ": stopped after step " + std::to_string(progress.step) + ", checkpoint " +
                             checkpoint + "; run the same command to continue",
                         128 + signal);
  }
  if (stopped) {
    if (folder) log.info("stopped after step {} (--stop-at-step); checkpoint {}", progress.step, checkpoint);
    return {folder ? folder->path().string() : "", checkpoint, progress.step, false,
            nlohmann::json::object()};
  }
  if (!folder) return {"", "", 0, false, nlohmann::json::object()};  // rank 0 evaluates and reports

  const nlohmann::json evaluation = task->evaluate(model);
  nlohmann::json results = final_results(initial_loss, evaluation, summary, *folder, checkpoint);
  if (ranks.distributed()) {
    results["world_size"] = ranks.world_size();
    results["allreduce_seconds"] = summary.allreduce_seconds;
  }
  nlohmann::json eval_row = evaluation;
  eval_row["kind"] = "eval";
  eval_row["step"] = progress.step;
  folder->append_metrics(eval_row);
  if (!folder->write_failure().empty())
    folder->throw_write_failure(progress.step, "checkpoint " + checkpoint);
  folder->write_json("results.json", results);
  log.info(
      "trained to step {} in {:.2f}s ({:.0f} tokens/s; health figures, spike scores and metrics rows took "
      "{:.1f}% of it); results in {}",
      progress.step, summary.seconds, summary.tokens_per_s,
      summary.seconds > 0 ? 100.0 * summary.diagnostics_seconds / summary.seconds : 0.0,
      (folder->path() / "results.json").string());
  if (request.print_table) std::cout << task->results_table(results) << std::flush;
  return {folder->path().string(), checkpoint, 0, false, results};
}

}  // namespace causal
