// Row shards of global micro-batches.
#include "dist/sharded_batches.h"

#include <ATen/ATen.h>

#include "core/errors.h"

namespace causal {
namespace {

at::Tensor rows(const at::Tensor& t, int64_t begin, int64_t count) {
  return t.defined() ? t.narrow(0, begin, count).contiguous() : t;
}

}  // namespace

Batch batch_rows(const Batch& batch, int64_t begin, int64_t count) {
  return {rows(batch.tokens, begin, count), rows(batch.positions, begin, count),
          rows(batch.segment_ids, begin, count), rows(batch.key_valid, begin, count),
          rows(batch.labels, begin, count)};
}

Batch ShardedBatches::next() {
  const Batch global = global_.next();
  const int64_t rows_total = global.labels.size(0);
  if (rows_total % world_size_ != 0) {
    throw DistributedError("a global micro-batch of " + std::to_string(rows_total) +
                           " rows does not split over " + std::to_string(world_size_) + " ranks");
  }
  const int64_t count = rows_total / world_size_;
  return batch_rows(global, rank_ * count, count);
}

}  // namespace causal
