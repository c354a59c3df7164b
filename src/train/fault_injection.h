// Fault injection for health-check tests and drills, from `causal train --inject-fault KIND:NAME@STEP`:
// poison one weight, sub-layer output or gradient with NaN at one step, or make the checkpoint write of
// one step fail part way or pause (docs/faults.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace causal {

struct FaultInjection {
  enum class Kind { kNone, kWeight, kActivation, kGradient, kSave };
  Kind kind = Kind::kNone;
  // parameter name (weight, gradient), sub-layer name (activation, see SublayerTrace), or for save:
  // "partial" (the write fails part way, as on a full disk) or "pause" (the write stalls a few seconds)
  std::string name;
  int64_t step = 0;  // 1-based step whose forward/backward is poisoned, or whose checkpoint write is hit

  bool at(int64_t step_done) const { return kind != Kind::kNone && step == step_done; }
  std::string describe() const;  // the spec it was parsed from

  // "weight:NAME@STEP", "activation:NAME@STEP", "gradient:NAME@STEP", "save:partial@STEP" or
  // "save:pause@STEP"; throws UsageError.
  static FaultInjection parse(const std::string& spec);
};

// A save fault, run inside the checkpoint write of `step` once its tensor files are in the temporary
// directory `dir`: "partial" cuts optimizer.safetensors in half and throws IoError (ENOSPC, injected);
// "pause" announces itself on stderr and sleeps, so a drill can kill the process in the middle of a write.
void apply_save_fault(const FaultInjection& fault, const std::filesystem::path& dir, int64_t step);

}  // namespace causal
