// Contracts of FlatAdamW: it takes the very steps LibTorch's AdamW takes, through a loaded state and
// through steps that fall back to the per-parameter path, while the parameters stay the module's own.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "core/optim_compat.h"
#include "train/flat_adamw.h"

using namespace causal;

namespace {

// Two groups, one decayed and one not, with shapes that do not share a vector width.
struct Params {
  std::vector<torch::Tensor> decayed, plain;
  std::vector<torch::Tensor> all() const {
    std::vector<torch::Tensor> out = decayed;
    out.insert(out.end(), plain.begin(), plain.end());
    return out;
  }
};

Params make_params() {
  torch::manual_seed(3);
  Params p;
  // The last is larger than the flat buffer takes: it is updated on its own.
  for (auto shape : {std::vector<int64_t>{7, 5}, {13}, {3, 3, 3}, {200, 200}})
    p.decayed.push_back(torch::randn(shape).requires_grad_(true));
  for (auto shape : {std::vector<int64_t>{11}, {2, 9}})
    p.plain.push_back(torch::randn(shape).requires_grad_(true));
  return p;
}

template <class Optimizer>
std::unique_ptr<Optimizer> make(const Params& p) {
  using torch::optim::AdamWOptions;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto options = [](double decay) {
    auto o = std::make_unique<AdamWOptions>(0.01);
    o->betas(std::make_tuple(0.9, 0.95)).eps(1e-8).weight_decay(decay);
    return o;
  };
  groups.emplace_back(p.decayed, options(0.1));
  groups.emplace_back(p.plain, options(0.0));
  return std::make_unique<Optimizer>(std::move(groups), AdamWOptions(0.01));
}

void set_gradients(const Params& p, int step, bool skip_one) {
  torch::manual_seed(100 + step);
  const auto all = p.all();
  for (size_t i = 0; i < all.size(); ++i) {
    at::Tensor(all[i]).mutable_grad() = (skip_one && i == 1) ? torch::Tensor() : torch::randn_like(all[i]);
  }
}

void set_lr(std::initializer_list<torch::optim::Optimizer*> optimizers, double lr) {
  for (auto* o : optimizers)
    for (auto& group : o->param_groups()) group.options().set_lr(lr);
}

void check_identical(const Params& a, const Params& b) {
  const auto x = a.all(), y = b.all();
  for (size_t i = 0; i < x.size(); ++i) CATCH_CHECK(torch::equal(x[i], y[i]));
}

}  // namespace

CATCH_TEST_CASE("flat AdamW: bit-identical to LibTorch's AdamW, through a loaded state and fallback steps",
                "[unit][train]") {
  const Params base = make_params(), flat = make_params();
  auto reference = make<torch::optim::AdamW>(base);
  auto flat_adamw = make<FlatAdamW>(flat);
  const void* handle_before = flat.decayed[0].unsafeGetTensorImpl();

  for (int step = 0; step < 12; ++step) {
    // One parameter without a gradient: the per-parameter path, and from then on (its step count differs).
    const bool skip_one = step == 10;
    set_gradients(base, step, skip_one);
    set_gradients(flat, step, skip_one);
    if (step == 4) {  // a checkpoint load replaces the moments with fresh tensors of the same values
      for (auto& [key, state] : flat_adamw->state()) {
        auto& adam = static_cast<torch::optim::AdamWParamState&>(*state);
        auto replaced = std::make_unique<torch::optim::AdamWParamState>();
        replaced->step(adam.step());
        replaced->exp_avg(adam.exp_avg().clone());
        replaced->exp_avg_sq(adam.exp_avg_sq().clone());
        state = std::move(replaced);
      }
    }
    if (step % 3 == 0) set_lr({reference.get(), flat_adamw.get()}, 0.01 / (1 + step));
    reference->step();
    flat_adamw->step();
    check_identical(base, flat);
    if (step == 9) {  // the flat path ran: each group's parameters lie back to back in one buffer
      CATCH_CHECK(flat.decayed[1].data_ptr<float>() == flat.decayed[0].data_ptr<float>() + 35);
      CATCH_CHECK(flat.plain[1].data_ptr<float>() == flat.plain[0].data_ptr<float>() + 11);
    }
  }
  // The module's parameter handles are the ones updated (they now view the flat buffer).
  CATCH_CHECK(flat.decayed[0].unsafeGetTensorImpl() == handle_before);
  const auto& state = static_cast<torch::optim::AdamWParamState&>(
      *flat_adamw->state().at(state_key(flat_adamw->state(), flat.decayed[0])));
  CATCH_CHECK(state.step() == 12);
  const auto& reference_state = static_cast<torch::optim::AdamWParamState&>(
      *reference->state().at(state_key(reference->state(), base.decayed[0])));
  CATCH_CHECK(torch::equal(state.exp_avg_sq(), reference_state.exp_avg_sq()));
}

CATCH_TEST_CASE("flat AdamW: the fused kernel takes LibTorch's AdamW steps to float32 rounding, on the CPU",
                "[unit][train]") {
  if (!kHasFusedAdamW) {  // LibTorch 1.13: the config value is refused before training (test_train.cpp)
    CATCH_CHECK_FALSE(make<FlatAdamW>(make_params())->uses_fused_kernel());
    return;
  }
  const Params base = make_params(), fused = make_params();
  auto reference = make<torch::optim::AdamW>(base);
  auto fused_adamw = make<FlatAdamW>(fused);
  CATCH_CHECK_FALSE(fused_adamw->uses_fused_kernel());  // kSeparate unless set
  fused_adamw->set_kernel(OptimizerKernel::kAuto);
  CATCH_CHECK(fused_adamw->uses_fused_kernel());  // wherever LibTorch has the kernel
  fused_adamw->set_kernel(OptimizerKernel::kFused);
  CATCH_CHECK(fused_adamw->uses_fused_kernel());
  for (int step = 0; step < 12; ++step) {
    const bool skip_one = step == 10;  // the base class's path for a missing gradient, as above
    set_gradients(base, step, skip_one);
    set_gradients(fused, step, skip_one);
    if (step % 3 == 0) set_lr({reference.get(), fused_adamw.get()}, 0.01 / (1 + step));
    reference->step();
    fused_adamw->step();
    const auto x = base.all(), y = fused.all();
    for (size_t i = 0; i < x.size(); ++i) {
      CATCH_CHECK(torch::allclose(x[i], y[i], /*rtol=*/1e-5, /*atol=*/1e-6));
      // A step that moves every parameter: the fused kernel did update them.
      if (step == 0) CATCH_CHECK_FALSE(torch::equal(y[i], make_params().all()[i]));
    }
  }
  const auto& state = static_cast<torch::optim::AdamWParamState&>(
      *fused_adamw->state().at(state_key(fused_adamw->state(), fused.decayed[0])));
  const auto& reference_state = static_cast<torch::optim::AdamWParamState&>(
      *reference->state().at(state_key(reference->state(), base.decayed[0])));
  CATCH_CHECK(state.step() == 12);
  CATCH_CHECK(torch::allclose(state.exp_avg(), reference_state.exp_avg(), 1e-5, 1e-7));
  CATCH_CHECK(torch::allclose(state.exp_avg_sq(), reference_state.exp_avg_sq(), 1e-5, 1e-9));
}
