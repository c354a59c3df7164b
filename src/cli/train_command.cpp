// `causal train`: flags -> TrainRequest (or a forensics replay) -> the library.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "config/config_io.h"
#include "core/environment.h"
#include "core/errors.h"
#include "data/token_file.h"
#include "dist/launcher.h"
#include "io/run_files.h"
#include "run/train_run.h"
#include "train/replay.h"

namespace causal::cli {

namespace {

struct TrainFlags {
  std::string config;
  std::vector<std::string> overrides;
  bool print_config = false;
  std::string replay;
  int64_t nproc = 0;
  TrainRequest request;
};

int run_train(const TrainFlags& flags) {
  if (!flags.replay.empty()) {
    const ReplayResult replay = replay_step(flags.replay);
    std::cout << format_replay(replay);
    return replay.outcome.finite ? kExitOk : kExitNumerical;
  }
  // A run folder made by `causal import` (or any run) carries its config: continuing it needs no file.
  std::string config_file = flags.config;
  const std::filesystem::path stored =
      std::filesystem::path(flags.request.start.run_dir) / run_files::kConfig;
  if (config_file.empty() && !flags.request.start.run_dir.empty() && std::filesystem::exists(stored))
    config_file = stored.string();
  if (config_file.empty())
    throw UsageError(
        "train: --config is required (or --replay BUNDLE, or --run-dir of a run with config.json)");
  const RunConfig config = load_config(config_file, flags.overrides, ConfigScope::kRun, train_vocab_size);
  if (flags.print_config) {
    std::cout << config_to_string(config) << "\n";
    return kExitOk;
  }
  if (flags.nproc > 0) {
    if (environment_variable("RANK") || environment_variable("WORLD_SIZE"))
      throw UsageError(
          "--nproc: RANK/WORLD_SIZE are already set (a launcher started this process); drop --nproc");
    return launch_local({flags.nproc, own_command_without_nproc(), config.dist.timeout_s});
  }
  const TrainOutcome outcome = train_run(config, flags.request);
  if (outcome.stopped_at_step > 0)
    std::cout << "stopped after step " << outcome.stopped_at_step << "; checkpoint " << outcome.checkpoint
              << "\n";
  return kExitOk;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  CLI::App* train = app.add_subcommand(
      "train",
      "Train a model from a config; writes runs/NAME/ (config.json, log.txt, metrics.jsonl, results.json, "
      "checkpoints/) and prints the results table. See docs/run-folder.md and docs/checkpoints.md.");
  train->add_option("--config", flags->config,
                    "Config file (JSON, // comments allowed); see docs/config.md. Required unless --replay");
  train->add_option("--set", flags->overrides, kSetHelp);
  train->add_option("--run-dir", flags->request.start.run_dir,
                    "Run folder. With --resume auto, an existing one is continued from its newest valid "
                    "checkpoint; otherwise it must be empty or absent. Default: runs/<name> (runs/<name>-N "
                    "when that holds a finished run)");
  train
      ->add_option("--resume", flags->request.start.resume,
                   "auto: continue from the newest valid checkpoint of the run folder (--run-dir, or "
                   "runs/<name> if that run is unfinished), else start fresh; never: always a new run; "
                   "PATH: a checkpoint directory (or run folder) to continue from, in its own run folder "
                   "or, with --run-dir, in a new one. The model/data config and seed must match it (exit 4)")
      ->capture_default_str();
  train
      ->add_option("--stop-at-step", flags->request.stop_at_step,
                   "Save a checkpoint after step K and exit 0, as a preempted run would (to reproduce an "
                   "interruption exactly)")
      ->check(at_least(1));
  train->add_option("--inject-fault", flags->request.inject_fault,
                    "Fault injection for drills and tests: KIND:NAME@STEP fills a weight (weight:PARAM), a "
                    "sub-layer output (activation:embed|blocks.<i>.attn|blocks.<i>.ffn|final_norm|logits) or "
                    "a gradient (gradient:PARAM) with NaN at that step, or fails (save:partial) or pauses "
                    "(save:pause) the checkpoint write of that step (docs/diagnostics.md)");
  train->add_option("--replay", flags->replay,
                    "Recompute the step saved in a forensics bundle (RUN/forensics/step_N) from its weights, "
                    "batch and RNG state, and report whether it is non-finite again (exit 5) and where");
  train
      ->add_option(
          "--nproc", flags->nproc,
          "Train data-parallel on N local worker processes (ranks on 127.0.0.1; train.batch_size is "
          "the global batch and must divide by N; docs/distributed.md). Without it, RANK, "
          "WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun's variables) make this process one rank")
      ->check(at_least(1));
  train->add_flag("--print-config", flags->print_config,
                  "Print the resolved config (every default filled in) and exit");
  return {train, [flags] { return run_train(*flags); }};
}

}  // namespace causal::cli
