// Learning rate as a pure function of the optimizer step.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace causal {

// LR for optimizer step `step` (0-based: the first update uses lr_at(0)). Warmup ramps linearly to the
// peak, reaching it at step warmup_steps-1; decay schedules then reach lr*min_lr_ratio at the last step.
// "wsd" holds the peak and decays linearly over the final decay_fraction of the post-warmup steps.
double lr_at(const TrainConfig& train, int64_t step);

}  // namespace causal
