// Where training micro-batches come from: each task implements next() over its training split.
#pragma once

#include "data/batch.h"

namespace causal {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next training micro-batch (on the CPU; the trainer moves it to the device).
  virtual Batch next() = 0;
};

}  // namespace causal
