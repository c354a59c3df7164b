// Normalisation layers: LayerNorm (bias optional) and RMSNorm behind one module, picked by NormKind.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "config/enums.h"
#include "model/residual_norm.h"

namespace causal {

struct NormOptions {
  explicit NormOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);                           // normalised (last) dimension
  TORCH_ARG(NormKind, kind) = NormKind::kLayerNorm;  // "layernorm" | "rmsnorm"
  TORCH_ARG(double, eps) = 1e-5;                     // added to the variance / mean square
  TORCH_ARG(bool, bias) = true;                      // LayerNorm only: learned shift; RMSNorm never has one
};

// Normalises over the last dimension. Parameters: "weight" (dim, init 1) and, for LayerNorm with bias,
// "bias" (dim, init 0). RMSNorm: x / sqrt(mean(x^2) + eps) * weight, computed in at least float32.
class NormImpl : public torch::nn::Module {
 public:
  explicit NormImpl(const NormOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  // The residual stream after a branch, sum = residual + delta, and forward(sum); delta undefined: residual
  // itself. With `fused` and tensors the kernel takes (residual_norm.h), one kernel each way that writes
  // normed in `normed_dtype` (nullopt: float32); otherwise ATen's add then forward(), bit for bit.
  ResidualNormed add_then_forward(const torch::Tensor& residual, const torch::Tensor& delta, bool fused,
                                  c10::optional<c10::ScalarType> normed_dtype);
  void reset_parameters();  // weight 1, bias 0
  const NormOptions& options() const { return options_; }

 private:
  NormOptions options_;
  torch::Tensor weight_;  // (dim)
  torch::Tensor bias_;    // (dim) or undefined
};
TORCH_MODULE(Norm);

}  // namespace causal
