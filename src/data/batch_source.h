// Where training micro-batches come from: each task implements next() over its training split, and can
// save and restore its position so a resumed run continues with the exact batch sequence.
#pragma once

#include <nlohmann/json.hpp>

#include "data/batch.h"

namespace causal {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next training micro-batch (on the CPU; the trainer moves it to the device).
  virtual Batch next() = 0;
  // Everything next() depends on besides the data itself (cursor, generator state), as JSON.
  virtual nlohmann::json state() const = 0;
  // Continues from a state() of a source built from the same data and options; throws DataError otherwise.
  virtual void restore(const nlohmann::json& state) = 0;
};

}  // namespace causal
