// Position-wise feed-forward network: GELU (exact or tanh) or ReLU MLP (fc_in, fc_out) or SwiGLU
// (gate_proj, up_proj, down_proj).
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "config/enums.h"
#include "model/linear.h"

namespace causal {

struct FeedForwardOptions {
  FeedForwardOptions(int64_t d_model, int64_t hidden) : d_model_(d_model), hidden_(hidden) {}
  TORCH_ARG(int64_t, d_model);                // D
  TORCH_ARG(int64_t, hidden);                 // hidden width (the config resolver picks 4D or ~8D/3)
  TORCH_ARG(FfnKind, kind) = FfnKind::kGelu;  // "gelu" | "gelu_tanh" | "swiglu" | "relu"
  TORCH_ARG(bool, bias) = true;               // biases in every linear layer
  TORCH_ARG(double, init_std) = 0.02;         // std of the input-side weights
  TORCH_ARG(double, out_init_std) = 0.02;     // std of fc_out / down_proj (scaled down for depth)
  TORCH_ARG(bool, fused) = false;  // on a GPU of a CAUSAL_CUDA build, the activation by causal's kernels
  TORCH_ARG(WeightShadows, weight_shadows) = WeightShadows::kOff;  // model.weight_shadows
};

// gelu:      fc_out(gelu(fc_in(x)))                    (exact erf GELU)
// gelu_tanh: fc_out(gelu_tanh(fc_in(x)))               (GPT-2's tanh approximation, transformers' gelu_new)
// relu:      fc_out(relu(fc_in(x)))                    (nn.TransformerEncoderLayer's default)
// swiglu:    down_proj(silu(gate_proj(x)) * up_proj(x))
// x is (..., D); the result has the same shape. Training keeps no GELU or swiglu hidden activation for
// backward: hidden_projection.h recomputes it there, or with `fused` on a GPU fused_hidden_projection.h,
// whose kernel also adds fc_in's (gate_proj's, up_proj's) bias. An adapter on the output projection
// takes the hidden activation as its input, which then exists in forward as in the plain composition.
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const FeedForwardOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  // normal(0, init_std) weights (out_init_std for the output projection), zero biases.
  void reset_parameters();
  const FeedForwardOptions& options() const { return options_; }
  // Brings the weight shadows up to date for products in `products` now (see AttentionImpl).
  void refresh_shadows(c10::optional<c10::ScalarType> products);

 private:
  FeedForwardOptions options_;
  Linear fc_in_{nullptr}, fc_out_{nullptr};                            // gelu
  Linear gate_proj_{nullptr}, up_proj_{nullptr}, down_proj_{nullptr};  // swiglu
  // The layers in product order: fc_in, fc_out or gate_proj, up_proj, down_proj.
  std::vector<Linear> layers() const;
};
TORCH_MODULE(FeedForward);

}  // namespace causal
