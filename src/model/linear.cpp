// The model's products (see linear.h).
#include "model/linear.h"

#include <torch/torch.h>

#include <cmath>

#include "model/autocast_scope.h"
#include "model/frozen_weight.h"
#include "model/weight_init.h"

namespace causal {

LinearImpl::LinearImpl(const LinearOptions& options) : options_(options) {
  TORCH_CHECK(options_.in_features() > 0 && options_.out_features() > 0,
              "[linear] expected positive sizes, got in=", options_.in_features(),
              " out=", options_.out_features());
  weight = register_parameter("weight", torch::empty({options_.out_features(), options_.in_features()}));
  if (options_.bias()) bias = register_parameter("bias", torch::empty({options_.out_features()}));
  // torch::nn::Linear's own init, which the owners then overwrite: it draws from the default generator,
  // and drawing the same numbers keeps every model (and dropout after it) as seeded before this module.
  // A model built to be loaded draws nothing (weight_init.h).
  torch::NoGradGuard no_grad;
  if (!draws_initial_weights()) return;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options_.in_features()));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

at::Tensor LinearImpl::product_weight(c10::DeviceType device) {
  TORCH_CHECK(!held(), "[linear] a weight held in ", to_string(weight_dtype_),
              " has no whole product weight: products take product(), merges dense_weight()");
  const c10::optional<c10::ScalarType> dtype =
      shadow_dtype(options_.weight_shadows(), enabled_autocast_dtype(device), weight);
  return dtype ? shadow_.weight({weight}, *dtype) : weight;
}

at::Tensor LinearImpl::product(const at::Tensor& x) {
  if (!held()) return torch::nn::functional::linear(x, product_weight(x.device().type()), bias);
  // A custom product gets no autocast: x goes in cast as autocast would cast it, and the bias joins in
  // the product's dtype, as at::linear's would.
  const at::Tensor in = in_products_dtype(x, enabled_autocast_dtype(x.device().type()));
  const at::Tensor y = frozen_product(in, weight, weight_dtype_, options_.in_features());  // (..., out)
  return bias.defined() ? y + bias.to(y.scalar_type()) : y;
}

at::Tensor LinearImpl::adapted(const at::Tensor& x, const at::Tensor& y, bool y_has_bias) {
  if (!adapter_) return y;
  const at::Tensor none;
  // A held weight as float32 only for an adapter that reads it (DoRA's norms): a transient whole copy.
  const at::Tensor w = adapter_->reads_weight() ? dense_weight() : weight;
  return y + adapter_->delta(x, {w, y, y_has_bias ? bias : none});
}

at::Tensor LinearImpl::forward(const at::Tensor& x) { return adapted(x, product(x)); }

void LinearImpl::refresh_shadow(c10::optional<c10::ScalarType> products) {
  const c10::optional<c10::ScalarType> dtype = shadow_dtype(options_.weight_shadows(), products, weight);
  if (dtype) shadow_.copy({weight}, *dtype);
}

void LinearImpl::hold_weight(BaseDtype dtype) {
  if (dtype == BaseDtype::kF32) return;
  TORCH_CHECK(!held(), "[linear] the weight is held in ", to_string(weight_dtype_), " already");
  TORCH_CHECK(!weight.requires_grad(), "[linear] only a frozen weight is held in ", to_string(dtype),
              ": it gets no gradient");
  torch::NoGradGuard no_grad;
  // set_data swaps the tensor the registered parameter shares with `weight`: one handle, one storage.
  weight.set_data(frozen_storage(weight, dtype));
  weight_dtype_ = dtype;
}

at::Tensor LinearImpl::dense_weight() const {
  return held() ? frozen_dense(weight, weight_dtype_, options_.in_features()) : weight;
}

void LinearImpl::set_adapter(std::shared_ptr<LinearAdapterImpl> adapter) {
  TORCH_CHECK(adapter != nullptr, "[linear] expected an adapter");
  adapter_ = register_module("lora", std::move(adapter));
}

}  // namespace causal
