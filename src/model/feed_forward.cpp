// Feed-forward networks (see feed_forward.h).
#include "model/feed_forward.h"

#include <torch/torch.h>

#include <algorithm>

#include "model/autocast_scope.h"
#include "model/fused_hidden_projection.h"
#include "model/hidden_projection.h"
#include "model/weight_init.h"

namespace causal {
namespace {

void init_linear(Linear& layer, double std) {
  if (draws_initial_weights()) torch::nn::init::normal_(layer->weight, 0.0, std);
  if (layer->bias.defined()) torch::nn::init::zeros_(layer->bias);
}

}  // namespace

FeedForwardImpl::FeedForwardImpl(const FeedForwardOptions& options) : options_(options) {
  const int64_t d = options_.d_model();
  const int64_t h = options_.hidden();
  TORCH_CHECK(d > 0 && h > 0, "[ffn] expected d_model > 0 and hidden > 0, got ", d, " and ", h,
              " (hint: resolve the config so that ffn_hidden is filled)");
  const auto linear = [&](int64_t in, int64_t out) {
    return Linear(LinearOptions(in, out).bias(options_.bias()).weight_shadows(options_.weight_shadows()));
  };
  if (options_.kind() != FfnKind::kSwiglu) {
    fc_in_ = register_module("fc_in", linear(d, h));
    fc_out_ = register_module("fc_out", linear(h, d));
  } else {
    gate_proj_ = register_module("gate_proj", linear(d, h));
    up_proj_ = register_module("up_proj", linear(d, h));
    down_proj_ = register_module("down_proj", linear(h, d));
  }
  reset_parameters();
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

std::vector<Linear> FeedForwardImpl::layers() const {
  if (options_.kind() == FfnKind::kSwiglu) return {gate_proj_, up_proj_, down_proj_};
  return {fc_in_, fc_out_};
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.d_model(),
              "[ffn] expected (...,D) with D=", options_.d_model(), ", got ", x.sizes());
  const FfnKind kind = options_.kind();
  std::vector<Linear> layer = layers();
  const c10::DeviceType device = x.device().type();
  const size_t out = layer.size() - 1;
  const bool gelu = kind == FfnKind::kGelu || kind == FfnKind::kGeluTanh;
  if (std::any_of(layer.begin(), layer.end(), [](const Linear& l) { return l->held(); })) {
    // A held base (train.lora.base_dtype) has no whole weight for project_hidden: each product through
    // its Linear. The hidden activation then exists in forward, but a held product keeps none of its
    // input for backward (its weight gets no gradient), so what backward keeps is as before.
    const torch::Tensor first = layer[0](x);  // (...,hidden)
    const torch::Tensor second =
        gelu || kind == FfnKind::kRelu ? torch::Tensor() : layer[1](x);  // (...,hidden)
    return layer[out](kind == FfnKind::kRelu ? torch::relu(first) : hidden_activation(kind, first, second));
  }
  if (kind != FfnKind::kRelu && options_.fused() && x.is_cuda() && layer[out]->adapter() == nullptr) {
    // The input products without their biases, which the activation's kernel adds; their adapters' terms
    // join the products before it.
    HiddenInputs in{layer[0]->adapted(x, torch::linear(x, layer[0]->product_weight(device)), false),
                    layer[0]->bias};
    if (kind == FfnKind::kSwiglu) {
      in.second = layer[1]->adapted(x, torch::linear(x, layer[1]->product_weight(device)), false);
      in.second_bias = layer[1]->bias;
    }
    if (hidden_projection_fusable(kind, in.first))
      return fused_project_hidden(kind, in, layer[out]->product_weight(device), layer[out]->bias);  // (...,D)
  }
  // Nothing to recompute for relu: its backward reads its output, which fc_out keeps anyway.
  if (kind == FfnKind::kRelu) return layer[1](torch::relu(layer[0](x)));  // (...,hidden) -> (...,D)
  const torch::Tensor first = layer[0](x);                                // (...,hidden)
  const torch::Tensor second = gelu ? torch::Tensor() : layer[1](x);      // (...,hidden)
  const torch::Tensor y =
      project_hidden(kind, first, second, layer[out]->product_weight(device), layer[out]->bias);  // (...,D)
  // An adapter on the output projection reads the hidden activation, made again here for it.
  return layer[out]->adapter() ? layer[out]->adapted(hidden_activation(kind, first, second), y) : y;
}

void FeedForwardImpl::refresh_shadows(c10::optional<c10::ScalarType> products) {
  for (Linear& layer : layers()) layer->refresh_shadow(products);
}

}  // namespace causal
