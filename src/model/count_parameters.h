// Parameter counting and the trainable subset of a module (inspect, the optimizer, docs, tests).
#pragma once

#include <torch/nn/module.h>

#include <vector>

namespace causal {

// Elements in every parameter of `module` and its submodules; a tied tensor registered once counts once.
// With `trainable_only`, those that require gradients (an adapter run freezes the rest, model/lora.h).
int64_t count_parameters(const torch::nn::Module& module, bool trainable_only = false);

// The parameters that require gradients, by name in registration order: what an optimizer steps, a
// gradient all-reduce sums and an adapter checkpoint holds.
torch::OrderedDict<std::string, torch::Tensor> trainable_parameters(const torch::nn::Module& module);

}  // namespace causal
