// Decoder-only transformer: summed input embeddings, positions, pre-norm blocks, final norm, output head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "config/model_config.h"
#include "model/block.h"
#include "model/forward_hooks.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/norm.h"
#include "model/weight_shadow.h"

namespace causal {

struct ModelInputs {
  torch::Tensor
      tokens{};  // (B,T,F) int64, one id per input field (F = config.inputs.size()); (B,T) if F == 1
  torch::Tensor
      positions{};  // (B,T) int64 absolute positions for RoPE/learned; undefined = arange(T) + cache length
  torch::Tensor segment_ids{};  // (B,T) int64 or undefined: a query sees keys of its own segment only
  torch::Tensor key_valid{};    // (B,T) bool or undefined: false marks padding keys nobody may attend to
};

struct ModelOutput {
  torch::Tensor logits;  // (B,T,V)
};

// Parameters, in forward order (names are checkpoint tensor names, see docs/model.md):
//   embed.<field>.weight, [pos_embed.weight], blocks.<i>.*, final_norm.*, [head.weight, head.bias].
// With tie_embeddings there is no head: logits use embed.<only field>.weight.
class TransformerImpl : public torch::nn::Module {
 public:
  // config is already resolved + validated (n_kv_heads, ffn_hidden filled); violations still throw.
  explicit TransformerImpl(const ModelConfig& config);
  // With a cache (incremental decoding), the new tokens are appended to it and their queries see every
  // cached key plus the causal part of the new ones.
  ModelOutput forward(const ModelInputs& inputs, KVCache* cache = nullptr);
  // forward() in two halves: the final-normed hidden state (B,T,D), the head's input, after the final_norm
  // hook; then the logits of a hidden state, after the logits hook. A loss that needs no logits of its own
  // (head_loss.h) takes the hidden state and the head's parameters instead.
  torch::Tensor final_hidden(const ModelInputs& inputs, KVCache* cache = nullptr);
  torch::Tensor logits(const torch::Tensor& hidden);
  // The output head's weight (V,D) float32, the input embedding's when tied (embeddings stay float32), a
  // fresh dequantized copy when train.lora.base_dtype holds the head (head_held()); its bias (V) or
  // undefined.
  torch::Tensor head_weight() const;
  bool head_held() const;
  torch::Tensor head_bias() const;
  // The head's weight as its products take it under model.weight_shadows (gpu_products.h's padded_head:
  // padded on a GPU, in autocast's dtype), made fresh; undefined when the products take head_weight().
  torch::Tensor head_shadow();
  // The output head's adapter (model/lora.h), or nullptr: a tied head, or none attached.
  LinearAdapterImpl* head_adapter() const;
  // Makes every weight shadow fresh now. Each forward does so for the shadows it reads; a replayed CUDA
  // graph runs no host code, so its caller does it first.
  void refresh_weight_shadows();
  // Where observers register (forward_hooks.h); the forward calls them at its hook points.
  ForwardHooks& hooks() { return hooks_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  ModelConfig config_;
  torch::nn::ModuleDict embed_{nullptr};        // one Embedding (vocab, D) per input field
  std::vector<torch::nn::Embedding> fields_;    // embed_'s entries, in config.inputs order
  torch::nn::Embedding pos_embed_{nullptr};     // (max_seq_len, D), only with position "learned"
  torch::nn::ModuleList blocks_list_{nullptr};  // registered as "blocks"
  std::vector<Block> blocks_;                   // L blocks, typed view of blocks_list_
  Norm final_norm_{nullptr};
  Linear head_{nullptr};  // D -> V; absent when tied
  WeightShadow head_shadow_;

  ForwardHooks hooks_;

  // inputs.tokens as (B,T,F), after checking every input and the cache against the model.
  torch::Tensor checked_tokens(const ModelInputs& inputs, const KVCache* cache) const;
  // The mask of this forward, or the last one when it depended only on the sequence's length (no key
  // padding, no segments, no cache): batches of one shape reuse it and the forms the kernels made of it.
  AttentionMask attention_mask(MaskParts parts, bool cached);

  struct ShapeMask {
    int64_t time = -1;
    c10::Device device = c10::kCPU;
    AttentionMask mask;
  };
  ShapeMask shape_mask_;
  // rope_inv_freq on the device of the last forward: made on the host and copied once, not every forward (a
  // copy from pageable host memory, which a CUDA graph cannot capture).
  torch::Tensor rope_inv_freq_;
  // The dtype the head's shadow is kept in (weight_shadow.h's shadow_dtype), or nullopt for none.
  c10::optional<c10::ScalarType> head_shadow_dtype() const;
};
TORCH_MODULE(Transformer);

}  // namespace causal
