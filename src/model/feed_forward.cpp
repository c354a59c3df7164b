// Feed-forward networks (see feed_forward.h).
#include "model/feed_forward.h"

#include <torch/torch.h>

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

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.d_model(),
              "[ffn] expected (...,D) with D=", options_.d_model(), ", got ", x.sizes());
  if (options_.kind() != FfnKind::kRelu && options_.fused() && x.is_cuda()) {
    // The input products without their biases, which the activation's kernel adds.
    const bool swiglu = options_.kind() == FfnKind::kSwiglu;
    torch::nn::Linear& first = swiglu ? gate_proj_ : fc_in_;
    HiddenInputs in{torch::linear(x, first->weight), first->bias};
    if (swiglu) in.second = torch::linear(x, up_proj_->weight), in.second_bias = up_proj_->bias;
    if (hidden_projection_fusable(options_.kind(), in.first)) {
      torch::nn::Linear& out = swiglu ? down_proj_ : fc_out_;
      return fused_project_hidden(options_.kind(), in, out->weight, out->bias);  // (...,D)
    }
  }
  if (options_.kind() == FfnKind::kGelu || options_.kind() == FfnKind::kGeluTanh) {
    return project_hidden(options_.kind(), fc_in_(x), torch::Tensor(), fc_out_->weight,
                          fc_out_->bias);  // (...,hidden) -> (...,D)
  }
  if (options_.kind() == FfnKind::kRelu) {
    // Nothing to recompute: relu's backward reads its output, which fc_out keeps anyway.
    return fc_out_(torch::relu(fc_in_(x)));  // (...,hidden) -> (...,D)
  }
  return project_hidden(FfnKind::kSwiglu, gate_proj_(x), up_proj_(x), down_proj_->weight,
                        down_proj_->bias);  // (...,hidden) -> (...,D)
}

}  // namespace causal
