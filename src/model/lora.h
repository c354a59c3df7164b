// LoRA adapters (docs/finetune.md): a low-rank update B A of a product's weight, trained while the base
// stays frozen. Attached from outside the model's computation, as a product's adapter (model/linear.h).
#pragma once

#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/train_config.h"
#include "model/linear.h"

namespace causal {

class TransformerImpl;

struct LoraOptions {
  LoraOptions(int64_t in_features, int64_t out_features, int64_t rank)
      : in_features_(in_features), out_features_(out_features), rank_(rank) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  TORCH_ARG(int64_t, rank);          // r
  TORCH_ARG(double, alpha) = 16.0;   // scale = alpha / r, or alpha / sqrt(r) with rslora
  TORCH_ARG(double, dropout) = 0.0;  // on the input, train mode only
  TORCH_ARG(bool, rslora) = false;
  TORCH_ARG(LoraInit, init) = LoraInit::kKaiming;
  TORCH_ARG(bool, dora) = false;  // DoRA: a magnitude per output row as well
};

// Parameters: a (r, in), b (out, r). delta(x) = scale * (dropout(x) a^T) b^T; b starts at zero, so an
// attached adapter leaves the model's function as it was until it trains.
// With dora, also magnitude (out), and the product becomes (magnitude / n) (x (W + scale b a)^T) + bias, n
// the row norms of W + scale b a taken as constants (no gradient), as DoRA's paper (its section 4.3) and
// PEFT do; with dropout in train mode x W^T is taken on the dropped input as PEFT takes it. A magnitude
// equal to the base's row norms (reset_magnitude while b is zero) leaves the function as it was.
class LoraImpl : public LinearAdapterImpl {
 public:
  explicit LoraImpl(const LoraOptions& options);
  at::Tensor delta(const at::Tensor& x, const AdaptedProduct& product) override;
  at::Tensor merged(const at::Tensor& weight) override;
  bool merges_exactly() const override { return !is_training() || options_.dropout() == 0.0; }
  bool reads_weight() const override { return options_.dora(); }
  // a: PEFT's default kaiming-uniform (a = sqrt(5)) or normal(0, 1/r); b: zeros.
  void reset_parameters();
  // magnitude = the row norms of weight + scale b a (DoRA's init on the base weight).
  void reset_magnitude(const at::Tensor& weight);
  double scale() const;
  const LoraOptions& options() const { return options_; }

  at::Tensor a;          // (r, in)
  at::Tensor b;          // (out, r)
  at::Tensor magnitude;  // (out), with dora only

 private:
  // n (out): the row norms of weight + scale b a, a constant to autograd (DoRA's norm).
  at::Tensor folded_row_norms(const at::Tensor& weight);

  LoraOptions options_;
};
TORCH_MODULE(Lora);

// The target name ("q", ..., "head", config/train_config.h's lora_target_names) of a product's parameter
// path ("blocks.3.attn.q_proj", "head"), or "" for a path that is no product.
std::string lora_target_of(const std::string& product_path);

// Attaches a LoRA adapter of `config` to every targeted product of `model` (in forward order, drawing
// their init from the default generator), and freezes every parameter that is not an adapter's. Returns
// the adapted products' paths. Throws std::invalid_argument (c10::Error) when no product is targeted.
std::vector<std::string> attach_lora(TransformerImpl& model, const LoraConfig& config);

// Sets every DoRA adapter's magnitude of `model` from its product's weight (LoraImpl::reset_magnitude), as
// float32 where it is held: once the base weights are in, before the first step.
void reset_dora_magnitudes(torch::nn::Module& model);

// Holds every frozen product weight of `model` (each Linear's weight; an adapter's are no product) in
// `dtype` from now on (LinearImpl::hold_weight), quantizing the values they have: called once the base's
// weights are loaded. Embeddings (and so a tied head), norms and biases stay float32: a lookup reads a
// few rows, and they are small. "f32" changes nothing.
void hold_base_weights(torch::nn::Module& model, BaseDtype dtype);

// hold_base_weights one weight at a time, as a load reads them: called with a parameter's name once the
// load has written it, holds that product's weight in `dtype` at once, so that no more than one product's
// float32 weight is resident beside the held ones (with a model built under SkipWeightInit,
// model/weight_init.h). Names of no product weight are left alone; "f32" returns a callback that does
// nothing. For the loads' `after_read` (checkpoint/checkpoint.h).
std::function<void(const std::string&)> hold_each_loaded(torch::nn::Module& model, BaseDtype dtype);

// Every parameter of `model` but the adapters', by name, float32: a held weight dequantized (the values
// the adapters trained over). Detached.
std::map<std::string, at::Tensor> dense_parameters(torch::nn::Module& model);

// dense_parameters() with each adapted product's weight replaced by its adapter folded in
// (LinearAdapterImpl::merged): the plain model that computes what base + adapters do (up to rounding, and
// with adapter dropout off). Detached.
std::map<std::string, at::Tensor> folded_parameters(torch::nn::Module& model);

// Each adapted product's LoRA adapter of `model`, by the product's path ("blocks.0.attn.q_proj").
std::vector<std::pair<std::string, LoraImpl*>> lora_adapters(torch::nn::Module& model);

// True for a parameter name that belongs to an adapter ("<product>.lora.a", ".lora.b", ".lora.magnitude").
bool is_adapter_parameter(const std::string& name);

}  // namespace causal
