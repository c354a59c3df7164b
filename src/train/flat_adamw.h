// AdamW over one flat buffer per parameter group for the small parameters: the same arithmetic as
// LibTorch's AdamW, in eight whole-buffer operations per step instead of eight per parameter. For small
// tensors the per-operation dispatch, not the arithmetic, is the optimizer's cost (docs/bench.md).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adamw.h>

#include <vector>

#include "config/enums.h"

namespace causal {

// A torch::optim::AdamW whose step() keeps each group's small parameters (at most kFlatLimit elements),
// and their first and second moments, as views into three flat tensors, so that checkpoints,
// learning-rate changes and state loading work as with the base class. Larger tensors are updated one by
// one in place: gathering their gradients would cost a copy bigger than the dispatch it saves. The layout
// is (re)built whenever a parameter or a state tensor is not the view it expects (the first step, a loaded
// checkpoint). A step with a parameter lacking a gradient, moments at different step counts within a
// group, or amsgrad takes the base class's per-parameter path.
// With the fused kernel (set_kernel) the step is instead LibTorch 2.x's at::_fused_adamw_ over every
// parameter of a group: one launch a step on a GPU, where the whole-tensor operations cost a launch each
// (about 600 a step for GPT-2-124M) and a pass over memory each. Its arithmetic is AdamW's, but not in
// the order of the operations above, so the last bits differ from the separate path.
class FlatAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;
  // kAuto: fused where LibTorch has the kernel (kHasFusedAdamW), else separate. kFused needs it.
  void set_kernel(OptimizerKernel kernel) { kernel_ = kernel; }
  // Whether the next step takes the fused kernel (given an eligible step).
  bool uses_fused_kernel() const;

 private:
  static constexpr int64_t kFlatLimit = 32768;  // 128 KiB of float32: the gather stays in cache

  struct FlatGroup {
    at::Tensor params, exp_avg, exp_avg_sq;              // the group's small parameters, concatenated
    std::vector<size_t> small, large;                    // indices into the group's parameters
    std::vector<torch::optim::AdamWParamState*> states;  // one per parameter, into state_
  };
  bool eligible() const;  // gradients and options allow the flat path (step counts: checked on the layout)
  torch::optim::AdamWParamState& state_for(const at::Tensor& param);  // created at step 0 when missing
  FlatGroup& layout(size_t group);
  at::Tensor fused_step(LossClosure closure);
  std::vector<FlatGroup> flat_;
  OptimizerKernel kernel_ = OptimizerKernel::kSeparate;
};

}  // namespace causal
