// An undefined tensor as an empty optional: LibTorch's autograd Function, and ATen's ops with optional
// tensor arguments, take an absent tensor only as nullopt.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace causal {

inline c10::optional<at::Tensor> optional_tensor(const at::Tensor& t) {
  return t.defined() ? c10::optional<at::Tensor>(t) : c10::optional<at::Tensor>();
}

}  // namespace causal
