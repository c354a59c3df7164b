// AdamW with decay and no-decay parameter groups, and the per-step learning-rate setter.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <memory>

#include "config/config.h"

namespace causal {

// Group 0 holds the matrices that are decayed; group 1 norms, biases and embeddings, which are decayed
// only when decay_norms_and_embeddings is set (decaying them mostly shrinks scales the model needs).
// The optimizer is a FlatAdamW (train/flat_adamw.h): LibTorch's AdamW, stepped over flat buffers.
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& config);

// True for parameters that weight decay leaves alone by default (by their stable names).
bool is_no_decay_parameter(const std::string& name);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace causal
