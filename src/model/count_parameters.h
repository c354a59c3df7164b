// Parameter counting for modules (inspect, docs, tests).
#pragma once

#include <torch/nn/module.h>

namespace causal {

// Elements in every parameter of `module` and its submodules; a tied tensor registered once counts once.
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace causal
