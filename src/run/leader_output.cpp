// The leader's run folder from config.json on: checkpoints and forensics during the loop, results after.
#include "run/leader_output.h"

#include <iostream>

#include "checkpoint/checkpointer.h"
#include "checkpoint/forensics_bundle.h"
#include "io/run_files.h"
#include "run/rank_context.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// Saves every train.checkpoint_every steps and keeps train.keep_checkpoints; an injected save fault
// strikes inside the write of its step.
CheckpointerOptions checkpointing_for(const TrainConfig& train, const FaultInjection& fault) {
  CheckpointerOptions checkpointing{train.checkpoint_every, train.keep_checkpoints};
  if (fault.kind == FaultInjection::Kind::kSave) {
    checkpointing.during_write = [fault](const fs::path& dir, int64_t step) {
      apply_save_fault(fault, dir, step);
    };
  }
  return checkpointing;
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

}  // namespace

// The checkpointer over the loop's model and optimizer, in RUN/checkpoints, continuing from the
// checkpoint the run started from; forensics bundles beside it.
class LeaderOutput::Loop final : public RankLoop {
 public:
  Loop(LeaderOutput& output, Transformer model, const torch::optim::Optimizer& optimizer,
       const std::optional<CheckpointInfo>& from, const FaultInjection& fault, const ThreadSplit& threads,
       const std::optional<BaseCheckpoint>& base)
      : output_(output),
        model_(std::move(model)),
        optimizer_(optimizer),
        fault_(fault),
        threads_(threads),
        base_(base),
        checkpointer_(output.folder_->path() / run_files::kCheckpoints,
                      checkpointing_for(output.config_.train, fault), *model_, optimizer, output.config_json_,
                      output.folder_->log(), from ? from->dir : fs::path()) {
    checkpointer_.set_extra_files(output.task_files_);
  }

  void add_hooks(TrainHooks& hooks) override {
    hooks.evaluate = [this](Transformer& m, int64_t) { return output_.task_.evaluate_validation(m); };
    hooks.on_abort = [this](const AbortedStep& step) {
      const ForensicsBundle bundle{step.step,
                                   step.lr,
                                   step.message,
                                   *step.micro_batches,
                                   step.rng_before,
                                   fault_.kind == FaultInjection::Kind::kNone ? "" : fault_.describe(),
                                   checkpointer_.last().string(),
                                   output_.config_json_,
                                   threads_,
                                   base_};
      const fs::path dir = write_forensics(output_.folder_->path(), bundle, *model_, optimizer_);
      return "; forensics in " + dir.string() + " (replay: causal train --replay " + dir.string() + ")";
    };
  }

  bool after_step(const TrainProgress& progress, bool stop,
                  const std::function<TrainingState()>& state) override {
    RunFolder& folder = *output_.folder_;
    // metrics.jsonl or log.txt could not be written (full disk, I/O error): a last checkpoint, then stop.
    const bool write_failed = !folder.write_failure().empty();
    try {
      checkpointer_.save(progress.step, progress.step == output_.config_.train.steps, state,
                         stop || write_failed);
    } catch (const CheckpointError& e) {
      if (write_failed) folder.throw_write_failure(progress.step, std::string("no checkpoint: ") + e.what());
      throw;
    }
    return !write_failed;
  }

  std::string newest_checkpoint() const override { return checkpointer_.last().string(); }

 private:
  LeaderOutput& output_;
  Transformer model_;
  const torch::optim::Optimizer& optimizer_;
  FaultInjection fault_;
  ThreadSplit threads_;
  std::optional<BaseCheckpoint> base_;
  Checkpointer checkpointer_;
};

LeaderOutput::LeaderOutput(std::unique_ptr<RunFolder> folder, std::map<std::string, std::string> task_files,
                           MatmulPeak peak, Task& task, const RunConfig& config,
                           const nlohmann::json& config_json, bool print_table)
    : folder_(std::move(folder)),
      task_files_(std::move(task_files)),
      peak_(std::move(peak)),
      task_(task),
      config_(config),
      config_json_(config_json),
      print_table_(print_table) {}

std::unique_ptr<RankLoop> LeaderOutput::loop(Transformer model, const torch::optim::Optimizer& optimizer,
                                             const std::optional<CheckpointInfo>& from,
                                             const FaultInjection& fault, const ThreadSplit& threads,
                                             const std::optional<BaseCheckpoint>& base) {
  return std::make_unique<Loop>(*this, std::move(model), optimizer, from, fault, threads, base);
}

void LeaderOutput::check_writes(int64_t step, const std::string& checkpoint) const {
  if (!folder_->write_failure().empty()) folder_->throw_write_failure(step, checkpoint);
}

TrainOutcome LeaderOutput::complete(TrainOutcome outcome, Transformer& model, double initial_loss,
                                    const TrainSummary& summary, const RankContext& ranks) {
  const int64_t step = summary.progress.step;
  const nlohmann::json evaluation = task_.evaluate(model);
  outcome.results = final_results(initial_loss, evaluation, summary, *folder_, outcome.checkpoint);
  if (ranks.distributed()) {
    outcome.results["world_size"] = ranks.world_size();
    outcome.results["allreduce_seconds"] = summary.allreduce_seconds;
  }
  nlohmann::json eval_row = evaluation;
  eval_row["kind"] = "eval";
  eval_row["step"] = step;
  folder_->append_metrics(eval_row);
  check_writes(step, "checkpoint " + outcome.checkpoint);
  folder_->write_json(run_files::kResults, outcome.results);
  folder_->log().info(
      "trained to step {} in {:.2f}s ({:.0f} tokens/s; health figures, spike scores and metrics rows took "
      "{:.1f}% of it); results in {}",
      step, summary.seconds, summary.tokens_per_s,
      summary.seconds > 0 ? 100.0 * summary.diagnostics_seconds / summary.seconds : 0.0,
      (folder_->path() / run_files::kResults).string());
  if (print_table_) std::cout << task_.results_table(outcome.results) << std::flush;
  return outcome;
}

}  // namespace causal
