// Gradients packed into flat buckets so that one all-reduce moves many small tensors (as DDP does).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace causal {

class GradientBuckets {
 public:
  // `gradients`: the defined gradients of one step, in parameter order (the same list on every rank,
  // since every rank runs the same graph). Buckets hold about `bucket_bytes` each, whole tensors only.
  GradientBuckets(std::vector<at::Tensor> gradients, int64_t bucket_bytes);

  // The flat buckets, holding copies of the gradients; all-reduce these in place.
  std::vector<at::Tensor>& buckets() { return buckets_; }
  // Copies the buckets back into the gradients.
  void unpack();

 private:
  struct Slot {
    size_t bucket;
    int64_t offset;
  };
  std::vector<at::Tensor> gradients_;
  std::vector<Slot> slots_;  // where each gradient lives, parallel to gradients_
  std::vector<at::Tensor> buckets_;
};

}  // namespace causal
