// Fault injection for health-check tests and drills: poison one weight, sub-layer output or gradient with
// NaN at one step, from `causal train --inject-fault KIND:NAME@STEP`.
#pragma once

#include <cstdint>
#include <string>

namespace causal {

struct FaultInjection {
  enum class Kind { kNone, kWeight, kActivation, kGradient };
  Kind kind = Kind::kNone;
  std::string name;  // parameter name (weight, gradient) or sub-layer name (activation, see SublayerTrace)
  int64_t step = 0;  // 1-based step whose forward/backward is poisoned

  bool at(int64_t step_done) const { return kind != Kind::kNone && step == step_done; }
  std::string describe() const;  // the spec it was parsed from

  // "weight:NAME@STEP", "activation:NAME@STEP" or "gradient:NAME@STEP"; throws UsageError.
  static FaultInjection parse(const std::string& spec);
};

}  // namespace causal
