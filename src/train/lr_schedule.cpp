// Learning-rate schedules: constant, linear, cosine, warmup-stable-decay.
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace causal {

double lr_at(const TrainConfig& train, int64_t step) {
  const double peak = train.optimizer.lr;
  const ScheduleConfig& s = train.schedule;
  const int64_t warmup = s.warmup_steps;
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);

  const double floor = peak * s.min_lr_ratio;
  // Decay progress in [0,1]: 0 right after warmup, 1 at the final step.
  auto progress = [&](int64_t start) {
    const int64_t span = train.steps - 1 - start;
    if (span <= 0) return 1.0;
    return std::clamp(static_cast<double>(step - start) / static_cast<double>(span), 0.0, 1.0);
  };
  switch (s.kind) {
    case ScheduleKind::kConstant:
      return peak;
    case ScheduleKind::kLinear:
      return peak - (peak - floor) * progress(warmup);
    case ScheduleKind::kCosine:
      return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * progress(warmup)));
    case ScheduleKind::kWsd: {
      const int64_t decay_steps =
          static_cast<int64_t>(std::ceil(s.decay_fraction * static_cast<double>(train.steps - warmup)));
      const int64_t decay_start = train.steps - decay_steps;
      if (step < decay_start) return peak;
      // The first decay step is already below the peak; the last one reaches the floor.
      const double p = static_cast<double>(step - decay_start + 1) / static_cast<double>(decay_steps);
      return peak - (peak - floor) * std::min(p, 1.0);
    }
  }
  return peak;
}

}  // namespace causal
