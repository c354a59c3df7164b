// Per-step health figures beyond the loss: gradient norms per layer, update/weight ratios, where the first
// non-finite value is, and the process's peak memory.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "train/forward_observers.h"

namespace causal {

// Parameters grouped by layer: "embed" (input and position embeddings), "blocks.<i>" and "head" (final norm
// and output head). Every parameter is in exactly one group.
struct LayerValues {
  double embed = 0.0;
  std::vector<double> blocks;
  double head = 0.0;
};

// L2 norm of each group's gradients (parameters without a gradient count as zero); the groups' norms
// combine in quadrature to the global gradient norm.
LayerValues gradient_norms_by_layer(torch::nn::Module& model, int64_t n_layers);

// The parameters of every block, copied, to measure what one optimizer step changed.
std::vector<std::vector<torch::Tensor>> snapshot_blocks(torch::nn::Module& model, int64_t n_layers);

// ||w_after - w_before|| / ||w_before|| per block (0 when the block's weights are all zero).
std::vector<double> update_ratios(torch::nn::Module& model,
                                  const std::vector<std::vector<torch::Tensor>>& before);

// Name of the first parameter (in registration = forward order) holding a non-finite value, or "".
std::string first_nonfinite_parameter(torch::nn::Module& model);
// Name of the first parameter whose gradient holds a non-finite value, or "".
std::string first_nonfinite_gradient(torch::nn::Module& model);
// Name of the first traced sub-layer output holding a non-finite value, or "".
std::string first_nonfinite_activation(const SublayerTrace& trace);

// Peak resident set size of this process so far, in MiB (getrusage).
double peak_rss_mib();

}  // namespace causal
