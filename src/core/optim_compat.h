// The LibTorch version differences in the optimizer API that causal touches: the key of an optimizer's
// per-parameter state map, and the fused AdamW kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/full.h>
#endif

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace causal {

// The optimizer's state map is keyed by the parameter's TensorImpl: as text in LibTorch 1.x, as the
// pointer itself in 2.x. The key type decides which.
template <class StateMap>
typename StateMap::key_type state_key(const StateMap&, const at::Tensor& parameter) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << parameter.unsafeGetTensorImpl();
    return text.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

// Every tensor of `tensors` times the one-element `factor`, in place. One multi-tensor kernel in LibTorch
// 2.x; in 1.13 _foreach_mul_ with a tensor factor is three operations a tensor, so there it is one each.
inline void scale_all(std::vector<at::Tensor>& tensors, const at::Tensor& factor) {
#if TORCH_VERSION_MAJOR >= 2
  at::_foreach_mul_(tensors, factor);
#else
  for (at::Tensor& t : tensors) t.mul_(factor);
#endif
}

// at::_fused_adamw_ (LibTorch 2.x, CPU and CUDA): every tensor's AdamW update in one multi-tensor kernel.
inline constexpr bool kHasFusedAdamW = TORCH_VERSION_MAJOR >= 2;

// One fused AdamW step of every tensor in the lists, `step` counted from 1, on the lists' device.
inline void fused_adamw(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                        const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                        int64_t step, double lr, double beta1, double beta2, double weight_decay,
                        double eps) {
#if TORCH_VERSION_MAJOR >= 2
  // The kernel reads each tensor's step count from a float32 tensor on its device; one serves them all.
  const at::Tensor count =
      at::full({}, static_cast<double>(step), params.front().options().dtype(at::kFloat));
  const std::vector<at::Tensor> steps(params.size(), count);
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, {}, steps, lr, beta1, beta2, weight_decay, eps,
                    /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)step, (void)lr, (void)beta1,
      (void)beta2, (void)weight_decay, (void)eps;
  throw std::logic_error("fused_adamw: this LibTorch has no fused AdamW kernel (kHasFusedAdamW)");
#endif
}

}  // namespace causal
