// Flat-buffer AdamW step.
#include "train/flat_adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>

#include <cmath>
#include <memory>

#include "core/optim_compat.h"

namespace causal {
namespace {

// Whether `part` is the slice [offset, offset + numel) of `flat`, shaped like `like`.
bool is_view_of(const at::Tensor& part, const at::Tensor& flat, int64_t offset, const at::Tensor& like) {
  return part.defined() && flat.defined() && part.is_contiguous() && part.sizes() == like.sizes() &&
         part.data_ptr() ==
             static_cast<void*>(static_cast<char*>(flat.data_ptr()) + offset * flat.element_size());
}

}  // namespace

bool FlatAdamW::eligible() const {
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return false;
    const std::vector<at::Tensor>& params = group.params();
    for (const at::Tensor& p : params) {
      const at::Tensor& grad = p.grad();
      if (!grad.defined() || grad.is_sparse() || grad.scalar_type() != p.scalar_type() ||
          p.scalar_type() != params.front().scalar_type() || p.device() != params.front().device())
        return false;
    }
  }
  return true;
}

torch::optim::AdamWParamState& FlatAdamW::state_for(const at::Tensor& p) {
  auto& entry = state_[state_key(state_, p)];
  if (!entry) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    entry = std::move(fresh);
  }
  return static_cast<torch::optim::AdamWParamState&>(*entry);
}

bool FlatAdamW::uses_fused_kernel() const {
  if (kernel_ == OptimizerKernel::kFused) return true;
  return kernel_ == OptimizerKernel::kAuto && kHasFusedAdamW;
}

FlatAdamW::FlatGroup& FlatAdamW::layout(size_t g) {
  if (flat_.size() != param_groups_.size()) flat_.assign(param_groups_.size(), FlatGroup{});
  FlatGroup& flat = flat_[g];
  const std::vector<at::Tensor>& params = param_groups_[g].params();
  // Still the views it was built as: nothing replaced a parameter's data or a moment since the last step.
  bool intact = flat.states.size() == params.size();
  int64_t offset = 0;
  for (size_t i = 0; intact && i < params.size(); ++i) {
    const auto found = state_.find(state_key(state_, params[i]));
    intact = found != state_.end() && found->second.get() == flat.states[i];
    if (!intact || params[i].numel() > kFlatLimit) continue;
    intact = is_view_of(params[i], flat.params, offset, params[i]) &&
             is_view_of(flat.states[i]->exp_avg(), flat.exp_avg, offset, params[i]) &&
             is_view_of(flat.states[i]->exp_avg_sq(), flat.exp_avg_sq, offset, params[i]);
    offset += params[i].numel();
  }
  if (intact) return flat;

  flat = FlatGroup{};
  std::vector<at::Tensor> values, first, second;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    torch::optim::AdamWParamState& state = state_for(p);
    flat.states.push_back(&state);
    if (p.numel() > kFlatLimit) {
      flat.large.push_back(i);
      continue;
    }
    flat.small.push_back(i);
    values.push_back(p.reshape(-1));
    first.push_back(state.exp_avg().reshape(-1));
    second.push_back(state.exp_avg_sq().reshape(-1));
  }
  if (flat.small.empty()) return flat;
  flat.params = at::cat(values);
  flat.exp_avg = at::cat(first);
  flat.exp_avg_sq = at::cat(second);
  offset = 0;
  for (const size_t i : flat.small) {
    const at::Tensor& p = params[i];
    const int64_t n = p.numel();
    // set_data keeps the parameter's identity (autograd, hooks, the module's handles) and moves its
    // values into the flat buffer.
    at::Tensor(p).set_data(flat.params.narrow(0, offset, n).view(p.sizes()));
    flat.states[i]->exp_avg(flat.exp_avg.narrow(0, offset, n).view(p.sizes()));
    flat.states[i]->exp_avg_sq(flat.exp_avg_sq.narrow(0, offset, n).view(p.sizes()));
    offset += n;
  }
  return flat;
}

namespace {

// LibTorch 1.13's AdamW::step for one tensor, operation for operation, so that both take bit-identical
// steps (the weight decay first, then the moments, then the update).
void adamw_update(at::Tensor& param, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, const at::Tensor& grad,
                  const torch::optim::AdamWOptions& options, int64_t step) {
  if (options.weight_decay() != 0) param.mul_(1 - options.lr() * options.weight_decay());
  const double beta1 = std::get<0>(options.betas());
  const double beta2 = std::get<1>(options.betas());
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  exp_avg.mul_(beta1).add_(grad, 1 - beta1);
  exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(options.eps());
  param.addcdiv_(exp_avg, denom, -options.lr() / bias_correction1);
}

// The closure's loss, computed with gradients on before any update, as the base class's step does.
at::Tensor run_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace

at::Tensor FlatAdamW::fused_step(LossClosure closure) {
  // Each parameter's state, looked up once; moments at different step counts take the base class's path.
  std::vector<std::vector<torch::optim::AdamWParamState*>> states(param_groups_.size());
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    for (const at::Tensor& p : param_groups_[g].params()) {
      states[g].push_back(&state_for(p));
      if (states[g].back()->step() != states[g].front()->step())
        return torch::optim::AdamW::step(std::move(closure));
    }
  }
  const at::Tensor loss = run_closure(closure);
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const std::vector<at::Tensor>& params = param_groups_[g].params();
    if (params.empty()) continue;
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(param_groups_[g].options());
    std::vector<at::Tensor> grads, exp_avgs, exp_avg_sqs;
    const int64_t step = states[g].front()->step() + 1;
    for (size_t i = 0; i < params.size(); ++i) {
      states[g][i]->step(step);
      grads.push_back(params[i].grad());
      exp_avgs.push_back(states[g][i]->exp_avg());
      exp_avg_sqs.push_back(states[g][i]->exp_avg_sq());
    }
    fused_adamw(params, grads, exp_avgs, exp_avg_sqs, step, options.lr(), std::get<0>(options.betas()),
                std::get<1>(options.betas()), options.weight_decay(), options.eps());
    // The fused kernel leaves the parameters' version counters as they were (LibTorch 2.11 on the CPU):
    // bumped here, as for the flat buffer's parameters below.
    for (const at::Tensor& p : params) torch::autograd::impl::bump_version(p);
  }
  return loss;
}

at::Tensor FlatAdamW::step(LossClosure closure) {
  if (!eligible()) return torch::optim::AdamW::step(std::move(closure));
  if (uses_fused_kernel()) return fused_step(std::move(closure));
  std::vector<FlatGroup*> groups(param_groups_.size(), nullptr);
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    if (param_groups_[g].params().empty()) continue;
    groups[g] = &layout(g);
    for (const auto* state : groups[g]->states)
      if (state->step() != groups[g]->states.front()->step())
        return torch::optim::AdamW::step(std::move(closure));
  }
  const at::Tensor loss = run_closure(closure);
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    if (groups[g] == nullptr) continue;
    FlatGroup& flat = *groups[g];
    std::vector<at::Tensor>& params = param_groups_[g].params();
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(param_groups_[g].options());
    const int64_t step = flat.states.front()->step() + 1;
    for (auto* state : flat.states) state->step(step);
    if (!flat.small.empty()) {
      std::vector<at::Tensor> grads;
      grads.reserve(flat.small.size());
      for (const size_t i : flat.small) {
        const at::Tensor& grad = params[i].grad();
        grads.push_back(grad.is_contiguous() ? grad.view(-1) : grad.reshape(-1));  // a view is one dispatch
      }
      adamw_update(flat.params, flat.exp_avg, flat.exp_avg_sq, at::cat(grads), options, step);
      // A parameter moved into the flat buffer by set_data keeps its own version counter, which writes
      // through the buffer leave as it was: bumped here, so that what checks it (autograd's saved tensors,
      // the model's weight shadows, weight_shadow.h) sees the change.
      for (const size_t i : flat.small) torch::autograd::impl::bump_version(params[i]);
    }
    for (const size_t i : flat.large) {
      auto* state = flat.states[i];
      adamw_update(params[i], state->exp_avg(), state->exp_avg_sq(), params[i].grad(), options, step);
    }
  }
  return loss;
}

}  // namespace causal
