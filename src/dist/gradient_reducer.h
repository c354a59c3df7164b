// The gradient all-reduce of data-parallel training, overlapped with backward as PyTorch's DDP Reducer
// does it: gradients live in flat buckets, a hook on each parameter packs its gradient the moment
// autograd produces it, and a bucket's all-reduce starts as soon as all of its gradients are in, while
// backward goes on computing the rest. Buckets follow reverse parameter order (roughly the order
// backward produces gradients) and start strictly in bucket order, so every rank issues the same
// collectives in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace causal {

class GradientReducer {
 public:
  // `parameters`: the model's, in the same order on every rank. Buckets hold about `bucket_bytes` each,
  // whole tensors of one dtype only.
  GradientReducer(ProcessGroup& group, std::vector<at::Tensor> parameters, int64_t bucket_bytes);
  ~GradientReducer();  // removes the hooks
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // The next backward pass packs each gradient as it is produced (plus what earlier micro-batches left
  // in .grad, exactly as autograd accumulates it) and starts every bucket it completes.
  void arm();
  // After backward: packs what the hooks did not (from .grad; with `repack`, everything again, for
  // gradients edited after backward), starts the remaining buckets, waits for all of them and writes
  // the sums into .grad. A gradient undefined after backward stays undefined (AdamW skips it).
  void finish(bool repack, const std::string& what);

  size_t bucket_count() const { return buckets_.size(); }
  // Gradient values summed per step: the parameters' elements (an adapter run's adapters alone).
  int64_t element_count() const;
  // How many buckets the last backward pass started before it ended: the overlapped ones.
  int64_t started_during_backward() const { return started_during_backward_; }

 private:
  struct Slot {
    size_t bucket = 0;
    int64_t offset = 0;
    bool packed = false;
  };
  struct Bucket {
    at::Tensor flat;
    size_t slots = 0;     // parameters in this bucket
    size_t unpacked = 0;  // of those, not yet packed this step
  };
  at::Tensor slice(size_t index);
  void pack(size_t index, const at::Tensor& incoming);
  void start_ready(bool in_backward);
  void reset();

  ProcessGroup& group_;
  std::vector<at::Tensor> parameters_;
  std::vector<unsigned> hooks_;
  std::vector<Slot> slots_;  // parallel to parameters_
  std::vector<Bucket> buckets_;
  size_t next_bucket_ = 0;  // buckets start in order: this one next
  bool armed_ = false;
  int64_t started_during_backward_ = 0;
};

}  // namespace causal
