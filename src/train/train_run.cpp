// Wiring of a training run; the CLI's `train` command is a thin call into this.
#include "train/train_run.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "config/config_io.h"
#include "data/retrieval_sampler.h"
#include "data/retrieval_task.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "eval/inspect.h"
#include "eval/retrieval_eval.h"
#include "eval/text_eval.h"
#include "model/transformer.h"
#include "train/checkpoint.h"
#include "train/checkpoint_dir.h"
#include "train/checkpoint_error.h"
#include "train/forensics.h"
#include "train/interrupt.h"
#include "train/run_folder.h"
#include "train/runtime.h"
#include "train/throughput.h"
#include "train/trainer.h"

namespace causal {
namespace {

// Batch order gets its own stream so that changing the model (and its init draws) leaves it unchanged.
uint64_t batch_seed(int64_t seed) { return static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull + 0x5EEDull; }

int64_t parameter_count(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

// What differs between the tasks: where batches come from and how a model is scored.
struct Task {
  std::unique_ptr<BatchSource> source;
  std::function<double(Transformer&)> initial_loss;  // on a fixed batch, before the first step
  std::function<nlohmann::json(Transformer&)> evaluate;
  std::function<std::string(const nlohmann::json&)> table;
  std::string describe;         // one line for the log
  nlohmann::json identity;      // what a checkpoint's data must still be to continue (beyond the config)
  int64_t sequence_length = 0;  // positions per training row (FLOPs per token depend on it)
};

struct RetrievalTask {
  RetrievalData data;
};

Task make_retrieval_task(const RunConfig& config, const c10::Device& device,
                         std::shared_ptr<RetrievalTask> owner) {
  Task task;
  const RetrievalData& data = owner->data;
  task.source =
      std::make_unique<RetrievalSampler>(data.train, config.train.batch_size, batch_seed(config.seed));
  task.initial_loss = [owner, device](Transformer& m) {
    return retrieval_fixed_batch_loss(m, owner->data, device);
  };
  task.evaluate = [owner, device](Transformer& m) {
    return evaluate_retrieval(m, owner->data, device).to_json();
  };
  task.table = format_retrieval_table;
  task.describe = std::to_string(data.train.size()) + " train / " + std::to_string(data.test.size()) +
                  " test retrieval examples";
  task.identity = {{"train_examples", data.train.size()}, {"test_examples", data.test.size()}};
  task.sequence_length = data.train.length();
  return task;
}

Task make_text_task(const RunConfig& config, const c10::Device& device, TokenFile train,
                    std::shared_ptr<TokenFile> val) {
  Task task;
  const TextRowOptions rows = TextRowOptions::from(config.data);
  const int64_t batch = config.train.batch_size;
  task.describe = std::to_string(train.num_tokens()) + " train / " + std::to_string(val->num_tokens()) +
                  " val tokens (" + train.tokenizer().describe() + ")";
  auto source = std::make_unique<TextBatchSource>(std::move(train), rows, batch, batch_seed(config.seed));
  const TextBatchSource* source_view = source.get();  // owned by the task, which outlives these closures' use
  task.source = std::move(source);
  task.initial_loss = [source_view, rows, batch, device](Transformer& m) {
    return text_fixed_batch_loss(m, source_view->file(), rows, batch, device);
  };
  task.evaluate = [val, rows, batch, device](Transformer& m) {
    return evaluate_text(m, *val, rows, batch, device).to_json("val_");
  };
  task.table = format_text_table;
  task.sequence_length = rows.seq_len;
  task.identity = {{"tokenizer", source_view->file().tokenizer().name},
                   {"tokenizer_description", source_view->file().tokenizer().describe()},
                   {"train_tokens", source_view->file().num_tokens()},
                   {"train_documents", source_view->file().num_documents()}};
  return task;
}

// Opens and checks everything the task needs; nothing is written until this succeeded.
Task make_task(const RunConfig& config, const c10::Device& device) {
  if (config.data.kind == DataKind::kRetrieval) {
    auto data = std::make_shared<RetrievalTask>(RetrievalTask{build_retrieval_data(config.data)});
    return make_retrieval_task(config, device, data);
  }
  TokenFile train(config.data.train);
  auto val = std::make_shared<TokenFile>(config.data.val);
  check_same_tokenizer(val->tokenizer(), config.data.val, train.tokenizer(), config.data.train);
  check_model_vocab(train.header(), config.data.train, config.model.inputs[0].vocab,
                    config.model.output_vocab);
  return make_text_task(config, device, std::move(train), val);
}

namespace fs = std::filesystem;

// Where a run starts: a new folder, or a checkpoint (in its own folder or forked into a new one).
struct StartPlan {
  fs::path continue_in;               // existing run folder to continue in; empty = create one
  std::string checkpoint_ref;         // with continue_in: find_checkpoint's ref ("" = newest)
  std::optional<fs::path> fork_from;  // checkpoint to start a new folder from
};

bool has_valid_checkpoint(const fs::path& run_dir) {
  return fs::is_directory(run_dir / "checkpoints") && latest_valid_checkpoint(run_dir / "checkpoints");
}

StartPlan plan_start(const RunConfig& config, const TrainRequest& request) {
  StartPlan plan;
  if (request.resume == "never") return plan;
  if (request.resume == "auto") {
    if (!request.run_dir.empty()) {
      if (has_valid_checkpoint(request.run_dir)) plan.continue_in = request.run_dir;
      return plan;
    }
    // Without --run-dir, only an unfinished run of the same name is continued; a finished one is kept
    // and the new run gets a folder of its own.
    const fs::path named = fs::path(request.runs_root) / config.name;
    if (has_valid_checkpoint(named) &&
        read_checkpoint(find_checkpoint(named, "")).state.step < config.train.steps) {
      plan.continue_in = named;
    }
    return plan;
  }
  const fs::path checkpoint = find_checkpoint(fs::path(), request.resume);
  const fs::path owner = checkpoint.parent_path().parent_path();
  if (request.run_dir.empty() || fs::weakly_canonical(request.run_dir) == fs::weakly_canonical(owner)) {
    plan.continue_in = owner;
    plan.checkpoint_ref = checkpoint.string();
  } else {
    plan.fork_from = checkpoint;
  }
  return plan;
}

// The requested config must describe the same model, data and seed as the checkpoint's; other fields
// (steps, intervals, threads) may change and are only reported.
void check_resumable(const CheckpointInfo& from, const nlohmann::json& requested, const Task& task,
                     spdlog::logger* log) {
  std::vector<std::string> errors = config_differences(from.config, requested, {"model", "data", "seed"});
  if (from.state.data_identity != task.identity) {
    errors.push_back("training data: checkpoint " + from.state.data_identity.dump() + ", now " +
                     task.identity.dump());
  }
  if (!errors.empty()) {
    std::string message = "[checkpoint] " + from.dir.string() + " cannot continue with this config: ";
    for (size_t i = 0; i < errors.size(); ++i) message += (i ? "; " : "") + errors[i];
    throw CheckpointError(message);
  }
  if (log) {
    for (const std::string& change :
         config_differences(from.config, requested, {"name", "device", "threads", "train"}))
      log->warn("config changed since the checkpoint: {}", change);
  }
}

// The seed's memory split and cost figures, once at start-up.
void log_cost_plan(spdlog::logger& log, const InspectReport& r, double peak_flops) {
  constexpr double kMiB = 1024.0 * 1024.0;
  log.info(
      "memory: parameters {:.2f} MiB, gradients {:.2f} MiB, AdamW state {:.2f} MiB, activations ~{:.1f} MiB "
      "per micro-batch of {} x {} (estimate), KV cache for one sequence of {} positions {:.2f} MiB",
      r.memory.parameters / kMiB, r.memory.gradients / kMiB, r.memory.optimizer / kMiB,
      r.memory.activations / kMiB, r.batch, r.flops.context, r.model.max_seq_len,
      kv_cache_bytes(1, r.model.n_layers, r.model.max_seq_len, r.model.n_kv_heads, r.model.head_dim(), 4) /
          kMiB);
  log.info(
      "cost: {:.3g} training FLOPs per token (6N + causal attention); matmul peak measured here {:.1f} "
      "GFLOP/s; "
      "compute-optimal data ~{} tokens (20 per parameter)",
      static_cast<double>(r.flops.training_causal), peak_flops / 1e9, r.scaling.compute_optimal_tokens);
}

bool all_finite(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.parameters()) {
    if (!p.isfinite().all().item<bool>()) return false;
  }
  return true;
}

}  // namespace

nlohmann::json train_run(const RunConfig& config, const TrainRequest& request) {
  const int64_t threads = configure_threads(config.threads);
  const c10::Device device = resolve_device(config.device);
  const nlohmann::json config_json = config_to_json(config);
  if (request.stop_at_step < 0 || request.stop_at_step > config.train.steps) {
    throw std::invalid_argument("--stop-at-step " + std::to_string(request.stop_at_step) +
                                " is outside 1..train.steps (" + std::to_string(config.train.steps) + ")");
  }

  // Lock a folder we continue in before reading its checkpoints: another process may be writing them.
  const StartPlan plan = plan_start(config, request);
  std::unique_ptr<RunFolder> folder;
  std::optional<CheckpointInfo> from;
  if (!plan.continue_in.empty()) {
    folder = RunFolder::open_existing(plan.continue_in);
    remove_stale_temporaries(plan.continue_in / "checkpoints");
    from = read_checkpoint(find_checkpoint(plan.continue_in, plan.checkpoint_ref));
    // Fixed-width step names sort by step, so no second read (and hash) of the newest checkpoint is needed.
    if (auto newest = latest_valid_checkpoint(plan.continue_in / "checkpoints");
        newest && newest->filename().string() > checkpoint_name(from->state.step)) {
      throw CheckpointError("[checkpoint] " + plan.continue_in.string() + " has checkpoints newer than " +
                            from->dir.filename().string() +
                            "; continuing there would overwrite them. Pass "
                            "--run-dir NEW to start a new run folder from that checkpoint");
    }
  } else if (plan.fork_from) {
    from = read_checkpoint(*plan.fork_from);
  }
  if (from && request.stop_at_step > 0 && request.stop_at_step <= from->state.step) {
    throw std::invalid_argument("--stop-at-step " + std::to_string(request.stop_at_step) +
                                ": the run continues after step " + std::to_string(from->state.step));
  }

  Task task = make_task(config, device);
  if (from) check_resumable(*from, config_json, task, folder ? &folder->log() : nullptr);
  if (from && !plan.continue_in.empty() && from->state.step == config.train.steps &&
      fs::exists(plan.continue_in / "results.json")) {
    std::ifstream in(plan.continue_in / "results.json");
    const nlohmann::json results = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!results.is_discarded()) {
      folder->log().info(
          "run {} already finished at step {}; nothing to do (--resume never starts a new run)",
          plan.continue_in.string(), from->state.step);
      if (request.print_table) std::cout << task.table(results) << std::flush;
      return results;
    }
  }
  if (!folder) folder = RunFolder::create(request.run_dir, request.runs_root, config.name);
  if (from && !plan.continue_in.empty()) folder->truncate_metrics_after(from->state.step);
  folder->write_json("config.json", config_json);
  auto& log = folder->log();
  const fs::path checkpoint_root = folder->path() / "checkpoints";

  torch::manual_seed(static_cast<uint64_t>(config.seed));
  Transformer model(config.model);
  model->to(device);
  log.info("run folder {}: {} parameters; {}; device {}, {} threads", folder->path().string(),
           parameter_count(*model), task.describe, device.str(), threads);
  const InspectReport plan_figures =
      inspect_model(config.model, task.sequence_length, config.train.batch_size);
  const double peak_flops = measure_matmul_peak(device);
  log_cost_plan(log, plan_figures, peak_flops);

  Trainer trainer(config, model, *task.source, *folder, device);
  trainer.set_flops(static_cast<double>(plan_figures.flops.training_causal), peak_flops);
  const FaultInjection fault =
      request.inject_fault.empty() ? FaultInjection{} : FaultInjection::parse(request.inject_fault);
  trainer.set_fault(fault);
  TrainProgress start;
  double initial_loss = 0.0;
  if (from) {
    load_model_weights(from->dir, *model);
    load_optimizer_state(from->dir, *model, trainer.optimizer());
    task.source->restore(from->state.data);
    trainer.spike_detector().restore(from->state.spike_detector);
    start = {from->state.step, from->state.tokens_seen, from->state.skipped_steps,
             from->state.consecutive_skips};
    initial_loss = from->state.initial_loss;
    restore_global_rng(from->state.rng, device);  // last: nothing after it may draw random numbers
    log.info("resuming from {} (step {} of {})", from->dir.string(), start.step, config.train.steps);
  } else {
    initial_loss = task.initial_loss(model);
    if (request.resume == "auto") log.info("no checkpoint to resume: starting at step 0");
  }

  fs::path last_checkpoint = from ? from->dir : fs::path();
  auto save = [&](const TrainProgress& progress) {
    if (!all_finite(*model)) {
      log.error("step {}: the model holds non-finite values; no checkpoint written", progress.step);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    TrainingState state;
    state.step = progress.step;
    state.tokens_seen = progress.tokens_seen;
    state.skipped_steps = progress.skipped_steps;
    state.initial_loss = initial_loss;
    state.data = task.source->state();
    state.data_identity = task.identity;
    state.rng = capture_global_rng(device);
    state.consecutive_skips = progress.consecutive_skips;
    state.spike_detector = trainer.spike_detector().state();
    last_checkpoint = save_checkpoint(checkpoint_root, state, *model, trainer.optimizer(), config_json);
    prune_checkpoints(checkpoint_root, config.train.keep_checkpoints);
    log.debug("checkpoint {} written in {:.3f}s", last_checkpoint.string(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };

  int signal = 0;
  bool stopped = false;
  TrainSummary summary;
  {
    InterruptGuard interrupts;
    TrainHooks hooks;
    hooks.evaluate = [&](Transformer& m, int64_t) { return task.evaluate(m); };
    hooks.after_step = [&](const TrainProgress& p) {
      signal = interrupts.pending();
      stopped = p.step == request.stop_at_step;
      const bool periodic = config.train.checkpoint_every > 0 && p.step % config.train.checkpoint_every == 0;
      if (signal || stopped || periodic || p.step == config.train.steps) save(p);
      return !signal && !stopped;
    };
    hooks.on_abort = [&](const AbortedStep& step) {
      const fs::path bundle = write_forensics(folder->path(), step, *model, trainer.optimizer(), config_json,
                                              last_checkpoint.string(), fault);
      return "; forensics in " + bundle.string() + " (replay: causal train --replay " + bundle.string() + ")";
    };
    summary = trainer.run(start, hooks);
  }
  const TrainProgress& progress = summary.progress;
  if (signal) {
    const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
    log.warn("{} received: stopped after step {}; checkpoint {}", name, progress.step,
             last_checkpoint.string());
    throw InterruptedRun(name + ": stopped after step " + std::to_string(progress.step) + ", checkpoint " +
                             last_checkpoint.string() + "; run the same command to continue",
                         128 + signal);
  }
  if (stopped) {
    log.info("stopped after step {} (--stop-at-step); checkpoint {}", progress.step,
             last_checkpoint.string());
    return {{"stopped_at_step", progress.step},
            {"checkpoint", last_checkpoint.string()},
            {"run_dir", folder->path().string()}};
  }

  nlohmann::json results;
  results["initial_loss"] = initial_loss;
  const nlohmann::json report = task.evaluate(model);
  results.update(report);
  results["steps"] = progress.step;
  results["skipped_steps"] = progress.skipped_steps;
  results["tokens_seen"] = progress.tokens_seen;
  results["final_train_loss"] = summary.final_loss;
  results["train_seconds"] = summary.seconds;
  results["tokens_per_s"] = summary.tokens_per_s;
  results["diagnostics_seconds"] = summary.diagnostics_seconds;
  results["run_dir"] = folder->path().string();
  results["checkpoint"] = last_checkpoint.string();
  nlohmann::json eval_row = report;
  eval_row["kind"] = "eval";
  eval_row["step"] = progress.step;
  folder->append_metrics(eval_row);
  folder->write_json("results.json", results);
  log.info(
      "trained to step {} in {:.2f}s ({:.0f} tokens/s; health figures, spike scores and metrics rows took "
      "{:.1f}% of it); results in {}",
      progress.step, summary.seconds, summary.tokens_per_s,
      summary.seconds > 0 ? 100.0 * summary.diagnostics_seconds / summary.seconds : 0.0,
      (folder->path() / "results.json").string());
  if (request.print_table) std::cout << task.table(results) << std::flush;
  return results;
}

}  // namespace causal
