// AdamW set-up.
#include "train/optimizer.h"

#include <torch/version.h>

#include <type_traits>

#include "core/errors.h"
#include "core/optim_compat.h"
#include "model/count_parameters.h"
#include "train/flat_adamw.h"

namespace causal {

bool is_no_decay_parameter(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".bias") || name.find("norm.") != std::string::npos || name.rfind("embed.", 0) == 0 ||
         name.rfind("pos_embed.", 0) == 0;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& config) {
  std::vector<torch::Tensor> decay, no_decay;
  // Frozen parameters (an adapter run's base) get no moments, no step and no place in the flat buffers.
  for (const auto& item : trainable_parameters(model)) {
    (is_no_decay_parameter(item.key()) ? no_decay : decay).push_back(item.value());
  }
  auto options = [&](double weight_decay) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(config.lr);
    o->betas(std::make_tuple(config.betas[0], config.betas[1])).eps(config.eps).weight_decay(weight_decay);
    return o;
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(config.weight_decay));
  groups.emplace_back(no_decay, options(config.decay_norms_and_embeddings ? config.weight_decay : 0.0));
  if (config.kernel == OptimizerKernel::kFused && !kHasFusedAdamW)
    throw ConfigError(
        "config", "train.optimizer.kernel",
        "\"fused\" needs LibTorch 2.x (its at::_fused_adamw_), this build has LibTorch " TORCH_VERSION
        "; expected \"auto\" or \"separate\"");
  auto optimizer = std::make_unique<FlatAdamW>(std::move(groups), torch::optim::AdamWOptions(config.lr));
  optimizer->set_kernel(config.kernel);
  return optimizer;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

OptimizerKernel kernel_for_run(OptimizerKernel configured, bool resuming,
                               const std::optional<std::string>& recorded, const c10::Device& device) {
  if (configured != OptimizerKernel::kAuto) return configured;
  bool fused = kHasFusedAdamW;
  if (resuming) fused = recorded ? *recorded == to_string(OptimizerKernel::kFused) : device.is_cuda();
  return fused && kHasFusedAdamW ? OptimizerKernel::kFused : OptimizerKernel::kSeparate;
}

namespace {

// The FlatAdamW that make_adamw returned as an AdamW, const where the optimizer is.
template <typename AdamW>
auto& flat_of(AdamW& optimizer) {
  using Flat = std::conditional_t<std::is_const_v<AdamW>, const FlatAdamW, FlatAdamW>;
  auto* flat = dynamic_cast<Flat*>(&optimizer);
  TORCH_CHECK(flat != nullptr, "[optimizer] expected the FlatAdamW of make_adamw");
  return *flat;
}

}  // namespace

void set_adamw_kernel(torch::optim::AdamW& optimizer, OptimizerKernel kernel) {
  flat_of(optimizer).set_kernel(kernel);
}

OptimizerKernel adamw_kernel(const torch::optim::AdamW& optimizer) {
  return flat_of(optimizer).uses_fused_kernel() ? OptimizerKernel::kFused : OptimizerKernel::kSeparate;
}

}  // namespace causal
