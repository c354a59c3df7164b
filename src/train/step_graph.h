// A micro-batch's forward, loss and backward captured once as a CUDA graph and replayed every step after
// (train.cuda_graphs, docs/gpu.md#cuda-graphs): one launch for the thousands of kernels the pass queues,
// so the GPU no longer waits for the host to queue them. Only in a CAUSAL_CUDA build; elsewhere
// available() is false and nothing here runs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "config/train_config.h"
#include "data/batch.h"
#include "model/transformer.h"

namespace causal {

class StepGraph {
 public:
  StepGraph();
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Whether this build can capture on `device` (a GPU of a CAUSAL_CUDA build).
  static bool available(const c10::Device& device);
  // The graph a run on `device` takes its steps through: with train.cuda_graphs "auto" where available();
  // else none (null).
  static std::unique_ptr<StepGraph> for_run(const TrainConfig& train, const c10::Device& device);

  // Whether a step may take its micro-batches from the graph: nothing observes the forward (a hook, a
  // fault, the diagnostics of a logged step), no data-parallel reduction hooks into backward, and no
  // capture failed before. Checked on the host; a micro-batch of another shape still runs eagerly.
  bool usable(Transformer& model, bool collect_diagnostics, bool data_parallel) const;

  // Sets every parameter's gradient to zero in place, making the missing ones: the graph writes into the
  // gradients' storage, which must stay where it was captured. Used for every step, graphed or not.
  void zero_gradients(Transformer& model) const;

  // Adds the gradients of loss_sum(batch) * scale to the parameters' gradients and returns loss_sum (a
  // float32 scalar on the device, overwritten by the next call), or an undefined tensor when this batch
  // must run eagerly (its shapes differ from the captured ones). The first calls run eagerly on the
  // graph's stream, so that every lazily made kernel handle, workspace and cached mask exists before the
  // capture; the capture replays at once. Parameters or gradients that moved since (a checkpoint loaded,
  // an optimizer that re-laid them out) are captured again.
  at::Tensor run(Transformer& model, const Batch& batch, const TrainConfig& train, float scale);

  // Why graphs were turned off for the rest of the run (a capture that failed), or "".
  const std::string& disabled_reason() const;
  int64_t captures() const;  // graphs captured so far
  int64_t replays() const;   // micro-batches run from a graph

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace causal
