// AdamW over one flat buffer per parameter group for the small parameters: the same arithmetic as
// LibTorch's AdamW, in eight whole-buffer operations per step instead of eight per parameter. For small
// tensors the per-operation dispatch, not the arithmetic, is the optimizer's cost (docs/bench.md).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adamw.h>

#include <vector>

namespace causal {

// A torch::optim::AdamW whose step() keeps each group's small parameters (at most kFlatLimit elements),
// and their first and second moments, as views into three flat tensors, so that checkpoints,
// learning-rate changes and state loading work as with the base class. Larger tensors are updated one by
// one in place: gathering their gradients would cost a copy bigger than the dispatch it saves. The layout
// is (re)built whenever a parameter or a state tensor is not the view it expects (the first step, a loaded
// checkpoint). A step with a parameter lacking a gradient, moments at different step counts within a
// group, or amsgrad takes the base class's per-parameter path.
class FlatAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  static constexpr int64_t kFlatLimit = 32768;  // 128 KiB of float32: the gather stays in cache

  struct FlatGroup {
    at::Tensor params, exp_avg, exp_avg_sq;              // the group's small parameters, concatenated
    std::vector<size_t> small, large;                    // indices into the group's parameters
    std::vector<torch::optim::AdamWParamState*> states;  // one per parameter, into state_
  };
  bool eligible() const;  // gradients and options allow the flat path (step counts: checked on the layout)
  FlatGroup& layout(size_t group);
  std::vector<FlatGroup> flat_;
};

}  // namespace causal
