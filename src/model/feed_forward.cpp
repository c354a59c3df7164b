// Feed-forward networks (see feed_forward.h).
#include "model/feed_forward.h"

#include <torch/torch.h>

#include "model/autocast_scope.h"
#include "model/fused_hidden_projection.h"
#include "model/hidden_projection.h"

namespace causal {
namespace {

void init_linear(torch::nn::Linear& layer, double std) {
  torch::nn::init::normal_(layer->weight, 0.0, std);
  if (layer->bias.defined()) torch::nn::init::zeros_(layer->bias);
}

}  // namespace

FeedForwardImpl::FeedForwardImpl(const FeedForwardOptions& options) : options_(options) {
  const int64_t d = options_.d_model();
  const int64_t h = options_.hidden();
  TORCH_CHECK(d > 0 && h > 0, "[ffn] expected d_model > 0 and hidden > 0, got ", d, " and ", h,
              " (hint: resolve the config so that ffn_hidden is filled)");
  const bool bias = options_.bias();
  if (options_.kind() != FfnKind::kSwiglu) {
    fc_in_ = register_module("fc_in", torch::nn::Linear(torch::nn::LinearOptions(d, h).bias(bias)));
    fc_out_ = register_module("fc_out", torch::nn::Linear(torch::nn::LinearOptions(h, d).bias(bias)));
  } else {
    gate_proj_ = register_module("gate_proj", torch::nn::Linear(torch::nn::LinearOptions(d, h).bias(bias)));
    up_proj_ = register_module("up_proj", torch::nn::Linear(torch::nn::LinearOptions(d, h).bias(bias)));
    down_proj_ = register_module("down_proj", torch::nn::Linear(torch::nn::LinearOptions(h, d).bias(bias)));
  }
  reset_parameters();
  shadows_.resize(layers().size());
}

void FeedForwardImpl::reset_parameters() {
  if (options_.kind() != FfnKind::kSwiglu) {
    init_linear(fc_in_, options_.init_std());
    init_linear(fc_out_, options_.out_init_std());
  } else {
    init_linear(gate_proj_, options_.init_std());
    init_linear(up_proj_, options_.init_std());
    init_linear(down_proj_, options_.out_init_std());
  }
}

std::vector<torch::nn::Linear> FeedForwardImpl::layers() const {
  if (options_.kind() == FfnKind::kSwiglu) return {gate_proj_, up_proj_, down_proj_};
  return {fc_in_, fc_out_};
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.d_model(),
              "[ffn] expected (...,D) with D=", options_.d_model(), ", got ", x.sizes());
  const FfnKind kind = options_.kind();
  const std::vector<torch::nn::Linear> layer = layers();
  const c10::optional<c10::ScalarType> shadow = shadow_dtype(
      options_.weight_shadows(), enabled_autocast_dtype(x.device().type()), layer.front()->weight);
  // The weight layer i's product takes: its shadow, or its own.
  const auto weight = [&](size_t i) {
    return shadow ? shadows_[i].weight({layer[i]->weight}, *shadow) : layer[i]->weight;
  };
  // As torch::nn::Linear computes it (the frontend's linear: matmul, then the bias added in place).
  const auto product = [&](size_t i, const torch::Tensor& in) {
    return torch::nn::functional::linear(in, weight(i), layer[i]->bias);
  };
  const size_t out = layer.size() - 1;
  if (kind != FfnKind::kRelu && options_.fused() && x.is_cuda()) {
    // The input products without their biases, which the activation's kernel adds.
    HiddenInputs in{torch::linear(x, weight(0)), layer[0]->bias};
    if (kind == FfnKind::kSwiglu) in.second = torch::linear(x, weight(1)), in.second_bias = layer[1]->bias;
    if (hidden_projection_fusable(kind, in.first))
      return fused_project_hidden(kind, in, weight(out), layer[out]->bias);  // (...,D)
  }
  // Nothing to recompute for relu: its backward reads its output, which fc_out keeps anyway.
  if (kind == FfnKind::kRelu) return product(1, torch::relu(product(0, x)));  // (...,hidden) -> (...,D)
  if (kind == FfnKind::kGelu || kind == FfnKind::kGeluTanh)
    return project_hidden(kind, product(0, x), torch::Tensor(), weight(1), layer[1]->bias);
  return project_hidden(kind, product(0, x), product(1, x), weight(2), layer[2]->bias);
}

void FeedForwardImpl::refresh_shadows(c10::optional<c10::ScalarType> products) {
  const std::vector<torch::nn::Linear> layer = layers();
  const c10::optional<c10::ScalarType> shadow =
      shadow_dtype(options_.weight_shadows(), products, layer.front()->weight);
  if (!shadow) return;
  for (size_t i = 0; i < layer.size(); ++i) shadows_[i].copy({layer[i]->weight}, *shadow);
}

}  // namespace causal
