// Fault injection for health-check tests and drills, from `causal train --inject-fault KIND:NAME@STEP`:
// poison one weight, sub-layer output or gradient with NaN at one step, or make the checkpoint write of
// one step fail part way or pause (docs/faults.md).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "model/forward_hooks.h"

namespace causal {

struct FaultInjection {
  enum class Kind { kNone, kWeight, kActivation, kGradient, kSave };
  Kind kind = Kind::kNone;
  // parameter name (weight, gradient), sub-layer name (activation, see ActivationFault), or for save:
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

// A fault that could never fire is a typo: throws UsageError for a parameter or sub-layer the model lacks.
void check_fault_target(torch::nn::Module& model, const FaultInjection& fault, int64_t n_layers);

// Fills the parameter `name`, or its gradient, with NaN.
void poison_parameter(torch::nn::Module& model, const std::string& name, bool gradient);

// Replaces one sub-layer's output by NaN (autograd still flows through it).
class ActivationFault : public ForwardObserver {
 public:
  // `name` one of embed, blocks.<i>.attn, blocks.<i>.ffn, final_norm and logits of a model with n_layers
  // blocks; throws UsageError naming `spec` otherwise.
  ActivationFault(const std::string& name, int64_t n_layers, const std::string& spec);
  bool watches(HookPoint point) const override { return point == site_.point; }
  at::Tensor observe(const HookSite& site, const at::Tensor& value) override;

 private:
  HookSite site_;
};

}  // namespace causal
