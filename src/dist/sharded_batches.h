// This rank's rows of each global micro-batch. Every rank draws the same global batches from its own copy
// of the task's source (same seed and state), so the global batch sequence and its order never depend on
// the world size, and the checkpointed source state is the same on every rank.
#pragma once

#include <cstdint>

#include "data/batch_source.h"

namespace causal {

class ShardedBatches : public BatchSource {
 public:
  // Rows [rank * B / world, (rank + 1) * B / world) of each batch of `global`; B must divide by world.
  ShardedBatches(BatchSource& global, int64_t rank, int64_t world_size)
      : global_(global), rank_(rank), world_size_(world_size) {}

  Batch next() override;
  nlohmann::json state() const override { return global_.state(); }
  void restore(const nlohmann::json& state) override { global_.restore(state); }

 private:
  BatchSource& global_;
  int64_t rank_;
  int64_t world_size_;
};

// Rows [begin, begin + count) of every tensor of `batch` (undefined ones stay undefined).
Batch batch_rows(const Batch& batch, int64_t begin, int64_t count);

}  // namespace causal
