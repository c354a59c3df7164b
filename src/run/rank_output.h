// What one rank of a training job writes once the run folder is prepared: the leader (leader_output.h)
// the run folder, every other rank (worker_output.h) nothing but its warnings on stderr.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "bench/matmul_peak.h"
#include "checkpoint/checkpoint.h"
#include "core/runtime.h"
#include "model/transformer.h"
#include "run/train_run.h"
#include "train/fault_injection.h"
#include "train/train_output.h"
#include "train/trainer.h"

namespace causal {

class RankContext;

// This rank's side of the training loop, beyond training: the leader's checkpoints, periodic evaluation
// and forensics. Made by RankOutput::loop; lives as long as the loop.
class RankLoop {
 public:
  virtual ~RankLoop() = default;
  // The leader's hooks: held-out evaluation every train.eval_every steps, and a forensics bundle when a
  // non-finite step ends the run. Other ranks add none.
  virtual void add_hooks(TrainHooks& hooks) = 0;
  // After each step, once every rank agrees whether the run stops there (`stop`): the leader saves a
  // checkpoint when one is due, on the last step or on a stop (`state` is built only then). A failed write
  // of metrics.jsonl or log.txt forces that save and ends the run: returns false. Throws CheckpointError.
  virtual bool after_step(const TrainProgress& progress, bool stop,
                          const std::function<TrainingState()>& state) = 0;
  // The newest checkpoint of the run ("" on ranks other than the leader).
  virtual std::string newest_checkpoint() const = 0;
};

// As a TrainOutput it takes the trainer's metrics rows (dropped on ranks other than the leader) and this
// rank's log.
class RankOutput : public TrainOutput {
 public:
  // Lines about the run as a whole (its folder, a changed AdamW kernel or world size, a requested stop):
  // the leader's log; the other ranks drop them.
  virtual spdlog::logger& run_log() = 0;
  virtual std::string run_dir() const = 0;  // the run folder ("" on ranks other than the leader)
  // The matmul peak MFU is reported against: measured by the leader alone (zero on the other ranks).
  virtual const MatmulPeak& peak() const = 0;
  // The loop's side over `model` and `optimizer`, continuing `from` (nullopt: step 0); `fault`, `threads`
  // and an adapter run's `base` go into the leader's forensics bundles.
  virtual std::unique_ptr<RankLoop> loop(Transformer model, const torch::optim::Optimizer& optimizer,
                                         const std::optional<CheckpointInfo>& from,
                                         const FaultInjection& fault, const ThreadSplit& threads,
                                         const std::optional<BaseCheckpoint>& base) = 0;
  // A failed write of the run folder's own files ends the run here: CheckpointError (exit 4) naming the
  // step and `checkpoint` (what became of the last checkpoint). The other ranks write no files.
  virtual void check_writes(int64_t step, const std::string& checkpoint) const = 0;
  // A completed run (`outcome` holds its folder and newest checkpoint): the leader evaluates `model` on
  // the held-out split, appends that eval row, writes results.json and prints the results table; the
  // other ranks return an empty outcome.
  virtual TrainOutcome complete(TrainOutcome outcome, Transformer& model, double initial_loss,
                                const TrainSummary& summary, const RankContext& ranks) = 0;
};

}  // namespace causal
