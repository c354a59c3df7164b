// Pre-norm transformer block (see block.h).
#include "model/block.h"

#include <torch/torch.h>

#include <cmath>

#include "model/autocast_scope.h"

namespace causal {

BlockImpl::BlockImpl(const ModelConfig& config)
    : dropout_(config.dropout), fused_(config.kernels == ModelKernels::kAuto) {
  const NormOptions norm =
      NormOptions(config.d_model).kind(config.norm).eps(config.norm_eps).bias(config.bias);
  // Each block adds two residual branches; scaling their output layers keeps the stream's variance
  // independent of depth (GPT-2).
  const double out_std = config.init_std / std::sqrt(2.0 * static_cast<double>(config.n_layers));
  attn_norm_ = register_module("attn_norm", Norm(norm));
  attn_ =
      register_module("attn", Attention(AttentionOptions(config.d_model, config.n_heads, config.n_kv_heads)
                                            .bias(config.bias)
                                            .qkv_bias(config.qkv_bias)
                                            .qk_norm(config.qk_norm)
                                            .norm_eps(config.norm_eps)
                                            .kernel(config.attention)
                                            .block(config.attention_block)
                                            .dropout(config.dropout)
                                            .init_std(config.init_std)
                                            .out_init_std(out_std)
                                            .weight_shadows(config.weight_shadows)));
  ffn_norm_ = register_module("ffn_norm", Norm(norm));
  ffn_ = register_module("ffn", FeedForward(FeedForwardOptions(config.d_model, config.ffn_hidden)
                                                .kind(config.ffn)
                                                .bias(config.bias)
                                                .init_std(config.init_std)
                                                .out_init_std(out_std)
                                                .fused(fused_)
                                                .weight_shadows(config.weight_shadows)));
}

BlockStream BlockImpl::forward(const BlockStream& stream, const AttentionContext& context) {
  const bool train = is_training() && dropout_ > 0.0;
  const ForwardHooks& hooks = *context.hooks;
  const int64_t layer = context.layer;
  // Not even a no-op dropout call when it cannot drop: a small model's step is dispatch-bound.
  const auto dropped = [&](const torch::Tensor& t) { return train ? torch::dropout(t, dropout_, true) : t; };
  // A fused norm writes its output in the dtype the products it feeds run in, so autocast need not cast it.
  const c10::optional<c10::ScalarType> products =
      fused_ ? enabled_autocast_dtype(stream.residual.device().type()) : c10::nullopt;
  const ResidualNormed before_attn =
      attn_norm_->add_then_forward(stream.residual, stream.pending, fused_, products);
  const torch::Tensor attn_out = hooks.at(HookPoint::kAttention, layer, attn_(before_attn.normed, context));
  const ResidualNormed before_ffn =
      ffn_norm_->add_then_forward(before_attn.sum, dropped(attn_out), fused_, products);  // (B,T,D) each
  const torch::Tensor ffn_out = hooks.at(HookPoint::kFeedForward, layer, ffn_(before_ffn.normed));
  if (!hooks.watched(HookPoint::kBlock)) return {before_ffn.sum, dropped(ffn_out)};
  return {hooks.at(HookPoint::kBlock, layer, before_ffn.sum + dropped(ffn_out)), torch::Tensor()};
}

}  // namespace causal
