// Pre-norm transformer block: x + drop(attn(attn_norm(x))), then x + drop(ffn(ffn_norm(x))).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "config/model_config.h"
#include "model/attention.h"
#include "model/feed_forward.h"
#include "model/norm.h"

namespace causal {

// Parameters, in forward order: attn_norm, attn, ffn_norm, ffn.
class BlockImpl : public torch::nn::Module {
 public:
  // config must be resolved (n_kv_heads and ffn_hidden filled).
  explicit BlockImpl(const ModelConfig& config);
  // x (B,T,D) -> x (B,T,D) after both residual updates.
  torch::Tensor forward(const torch::Tensor& x, const AttentionContext& context);

  Attention attn() const { return attn_; }
  FeedForward ffn() const { return ffn_; }

 private:
  double dropout_;  // residual-branch dropout, train mode only
  Norm attn_norm_{nullptr};
  Attention attn_{nullptr};
  Norm ffn_norm_{nullptr};
  FeedForward ffn_{nullptr};
};
TORCH_MODULE(Block);

}  // namespace causal
