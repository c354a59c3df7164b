// `causal train --replay BUNDLE`: recompute the step a forensics bundle saved, to see whether it fails
// again and where.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "train/trainer.h"

namespace causal {

struct ReplayResult {
  int64_t step = 0;
  std::string original_message;  // what the run reported
  StepOutcome outcome;           // what the replay computed
};

// Rebuilds the model from the bundle, restores the RNG, re-applies the fault and recomputes the step's
// forward/backward and health verdict (no update). Throws CheckpointError for a damaged bundle.
ReplayResult replay_step(const std::filesystem::path& bundle);

// Two lines: the step as recorded, and as replayed (with the cause when it is non-finite again).
std::string format_replay(const ReplayResult& replay);

}  // namespace causal
