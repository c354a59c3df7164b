// One product of the model: its weight and bias, the weight's shadow (weight_shadow.h) and an optional
// adapter, a module attached from outside (model/lora.h) that adds its own term to the product's output. A
// frozen weight may be held in less than float32 (frozen_weight.h): then every product goes through here.
#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>

#include "config/enums.h"
#include "model/weight_shadow.h"

namespace causal {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(WeightShadows, weight_shadows) = WeightShadows::kOff;  // model.weight_shadows
};

// What an adapter sees of its product besides the input: the weight (out, in) and the product's output y,
// which holds the bias `bias_in_y` (undefined where y is x W^T alone, its kernel adding the bias later).
struct AdaptedProduct {
  const at::Tensor& weight;
  const at::Tensor& y;
  const at::Tensor& bias_in_y;
};

// What an adapter adds to a product y = x W^T + b. Registered on the product as its submodule "lora", so
// that its parameters are named "<product>.lora.<name>" in checkpoints.
class LinearAdapterImpl : public torch::nn::Module {
 public:
  // x (..., in) -> the adapter's term of the output (..., out), added to product.y.
  virtual at::Tensor delta(const at::Tensor& x, const AdaptedProduct& product) = 0;
  // weight (out, in) with the adapter folded in, a differentiable function of the adapter's parameters:
  // x merged^T equals x W^T + delta(x) whenever merges_exactly(). For products that take a weight rather
  // than run one on an input (the chunked head loss), and for merging an adapter into its base.
  virtual at::Tensor merged(const at::Tensor& weight) = 0;
  // False while dropout on the adapter's input is live (train mode), which no folded weight reproduces.
  virtual bool merges_exactly() const = 0;
  // Whether delta reads product.weight (else it may be a held weight's storage, not its values).
  virtual bool reads_weight() const { return false; }
};

// Parameters: weight (out, in), [bias (out)], then the adapter's. torch::nn::Linear's names and init
// sites; the owners (attention, FFN, transformer) initialise the values.
class LinearImpl : public torch::nn::Module {
 public:
  explicit LinearImpl(const LinearOptions& options);
  // x (..., in) -> product(x) + the adapter's delta(x) (..., out).
  at::Tensor forward(const at::Tensor& x);
  // x W^T + b on product_weight(), as torch::nn::Linear computes it (the frontend's F::linear: under
  // autocast with a bias it rounds unlike at::linear, and the shadowed path must give the same bits).
  at::Tensor product(const at::Tensor& x);
  // The weight this forward's products take on `device`: its shadow under autocast where
  // model.weight_shadows keeps one, else the weight itself. A held weight has none (refused): its products
  // take product().
  at::Tensor product_weight(c10::DeviceType device);
  // y plus the adapter's term for input x; y unchanged without an adapter. y is x W^T + b, or x W^T alone
  // where `y_has_bias` is false (a product whose kernel adds the bias after).
  at::Tensor adapted(const at::Tensor& x, const at::Tensor& y, bool y_has_bias = true);
  // Brings the shadow up to date for products in `products` now (a CUDA graph's replay runs no host code).
  void refresh_shadow(c10::optional<c10::ScalarType> products);

  // Attaches the adapter, once (a second is refused: there is nothing to undo, build a new model).
  void set_adapter(std::shared_ptr<LinearAdapterImpl> adapter);

  // From now on holds the frozen weight in `dtype` (train.lora.base_dtype): `weight` becomes its storage
  // (frozen_weight.h: bfloat16 (out, in), or uint8 ggml blocks (out, row bytes)) in place, the float32
  // values freed, so that .to(device), named_parameters() and forensics bundles see the storage. Once, on
  // a weight that requires no gradient; "f32" leaves the weight as it is.
  void hold_weight(BaseDtype dtype);
  BaseDtype weight_dtype() const { return weight_dtype_; }
  bool held() const { return weight_dtype_ != BaseDtype::kF32; }
  // The weight as float32 (out, in): `weight` itself, or its storage dequantized (a fresh tensor), the
  // values the products compute with.
  at::Tensor dense_weight() const;
  LinearAdapterImpl* adapter() const { return adapter_.get(); }
  const LinearOptions& options() const { return options_; }

  at::Tensor weight;  // (out, in)
  at::Tensor bias;    // (out) or undefined

 private:
  LinearOptions options_;
  WeightShadow shadow_;
  std::shared_ptr<LinearAdapterImpl> adapter_;
  BaseDtype weight_dtype_ = BaseDtype::kF32;  // what `weight` holds (hold_weight)
};
TORCH_MODULE(Linear);

}  // namespace causal
