// Pre-norm transformer block: x + drop(attn(attn_norm(x))), then x + drop(ffn(ffn_norm(x))). Each add is
// left to the norm that reads its sum, which makes both in one pass where model.kernels lets it.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "config/model_config.h"
#include "model/attention.h"
#include "model/feed_forward.h"
#include "model/norm.h"

namespace causal {

// The residual stream between blocks, whose value is residual + pending: pending, the last branch's output
// (or undefined), is added by the next norm that reads the stream (NormImpl::add_then_forward).
struct BlockStream {
  torch::Tensor residual;  // (B,T,D)
  torch::Tensor pending;   // (B,T,D) or undefined
};

// Parameters, in forward order: attn_norm, attn, ffn_norm, ffn.
class BlockImpl : public torch::nn::Module {
 public:
  // config must be resolved (n_kv_heads and ffn_hidden filled).
  explicit BlockImpl(const ModelConfig& config);
  // The stream before the block -> the stream after both residual updates. The feed-forward branch is left
  // pending unless a hook watches the block's output, which then sees the sum.
  BlockStream forward(const BlockStream& stream, const AttentionContext& context);

  Attention attn() const { return attn_; }
  FeedForward ffn() const { return ffn_; }

 private:
  double dropout_;  // residual-branch dropout, train mode only
  bool fused_;      // model.kernels "auto": norms take the residual add with them
  Norm attn_norm_{nullptr};
  Attention attn_{nullptr};
  Norm ffn_norm_{nullptr};
  FeedForward ffn_{nullptr};
};
TORCH_MODULE(Block);

}  // namespace causal
