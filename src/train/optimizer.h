// AdamW with decay and no-decay parameter groups, and the per-step learning-rate setter.
#pragma once

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <memory>
#include <optional>
#include <string>

#include "config/config.h"

namespace causal {

// Of the parameters that require gradients: group 0 holds the matrices that are decayed; group 1 norms,
// biases and embeddings, which are decayed only when decay_norms_and_embeddings is set (decaying them mostly
// shrinks scales the model needs). The optimizer is a FlatAdamW (train/flat_adamw.h): LibTorch's AdamW,
// stepped over flat buffers.
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& config);

// True for parameters that weight decay leaves alone by default (by their stable names).
bool is_no_decay_parameter(const std::string& name);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

// The AdamW kernel a run steps with, kFused or kSeparate: the configured one, and for "auto" the fused
// kernel wherever LibTorch has it (2.x). A run resumed under "auto" keeps the kernel its checkpoint
// recorded ("fused" or "separate"), so that it stays bit-exact; nullopt for a checkpoint from before they
// recorded it, when "auto" meant fused on a GPU only. A recorded "fused" falls back to separate on a
// LibTorch without the kernel (to float32 rounding, no longer bit-exact).
OptimizerKernel kernel_for_run(OptimizerKernel configured, bool resuming,
                               const std::optional<std::string>& recorded, const c10::Device& device);

// Sets or reads the kernel of an optimizer from make_adamw; adamw_kernel never returns kAuto.
void set_adamw_kernel(torch::optim::AdamW& optimizer, OptimizerKernel kernel);
OptimizerKernel adamw_kernel(const torch::optim::AdamW& optimizer);

}  // namespace causal
