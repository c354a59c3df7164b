// One rank's side of data-parallel training: global token counts, the gradient all-reduce, global health
// verdicts, identical weights on every rank, and collective stop decisions. The trainer calls it at the
// points of a step where ranks must agree (docs/distributed.md).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/gradient_reducer.h"
#include "dist/process_group.h"

namespace causal {

struct GradientSumResult {
  double loss = 0.0;      // the sum of every rank's loss share: the global mean loss
  int64_t bad_rank = -1;  // the lowest rank whose loss or gradients were non-finite before the sum
  std::string bad_cause;  // that rank's diagnosis ("parameter x holds a non-finite value", ...)
};

class DataParallel {
 public:
  DataParallel(ProcessGroup& group, int64_t bucket_bytes) : group_(group), bucket_bytes_(bucket_bytes) {}
  ~DataParallel();

  int64_t rank() const { return group_.rank(); }
  int64_t world_size() const { return group_.world_size(); }
  bool leader() const { return group_.rank() == 0; }
  ProcessGroup& group() { return group_; }

  // {valid tokens, input tokens} of one step summed over ranks (the loss denominator is global).
  std::vector<int64_t> sum_counts(int64_t valid_tokens, int64_t input_tokens);

  // The model's parameters, whose gradients every step sums (hooks on them overlap it with backward).
  void attach(std::vector<at::Tensor> parameters);
  // Called just before the step's last backward pass: its gradients start their all-reduce as they come.
  void before_last_backward();
  // Finishes the sum of the gradients (each rank's share, already divided by the global valid-token
  // count) and sums the loss share over ranks. `local_cause` is this rank's diagnosis when its loss or
  // gradients are non-finite ("" when finite); it is shared so every rank names the same culprit.
  // `step` keys it. `edited_after_backward`: the gradients changed after backward (an injected fault),
  // so they are packed again.
  GradientSumResult sum_gradients(double loss, bool local_finite, const std::string& local_cause,
                                  int64_t step, bool edited_after_backward);
  size_t bucket_count() const;
  int64_t reduced_elements() const;  // gradient values all-reduced per step (GradientReducer::element_count)
  // Whether `gradients` are all finite, checked on this rank alone (before the sum).
  static bool all_finite(const std::vector<at::Tensor>& gradients);

  // Rank 0's values into `tensors` on every rank, then a checksum over ranks: throws DistributedError
  // naming `what` if any rank still differs.
  void broadcast_and_verify(std::vector<at::Tensor> tensors, const std::string& what);
  // The largest `value` over ranks, on every rank (a stop request reaching one rank stops all together).
  int64_t max_over_ranks(int64_t value);

  // Seconds spent waiting on collectives since the last call (metrics: "allreduce_s"); an all-reduce
  // that ran while backward computed costs nothing here.
  double take_seconds();

 private:
  ProcessGroup& group_;
  int64_t bucket_bytes_;
  std::unique_ptr<GradientReducer> reducer_;
  double seconds_ = 0.0;
};

}  // namespace causal
