// Test helper: one small resolved text model that the model tests share and adjust.
#pragma once

#include <cstdint>

#include "config/model_config.h"

namespace causal::testing {

// One input field (vocab 11), d_model 32, 2 layers, 4 query and 2 KV heads (GQA), RoPE, on `kernel` with
// `block` keys per flash block. init_std 0.1, larger than the default, so that differences between kernels
// or precisions stand far above rounding.
inline ModelConfig small_text_model(AttentionKind kernel, int64_t block) {
  ModelConfig c;
  c.inputs = {InputField{"token", 11}};
  c.output_vocab = 11;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 64;
  c.max_seq_len = 32;
  c.attention = kernel;
  c.attention_block = block;
  c.init_std = 0.1;
  return c;
}

// The two shapes export writes (docs/export.md): llama (RMSNorm, SwiGLU, RoPE, no biases, untied) and gpt2
// (LayerNorm, GELU, learned positions, biases, tied). Vocab `vocab`, d_model 32, 2 layers, 4 heads (llama: 2
// KV heads), FFN 64, 16 positions; init_std 0.2, so a wrong weight layout moves logits far above rounding.
inline ModelConfig small_llama_model(int64_t vocab) {
  ModelConfig c;
  c.inputs = {InputField{"token", vocab}};
  c.output_vocab = vocab;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn = FfnKind::kSwiglu;
  c.ffn_hidden = 64;
  c.norm = NormKind::kRmsNorm;
  c.position = PositionKind::kRope;
  c.max_seq_len = 16;
  c.bias = false;
  c.tie_embeddings = false;
  c.init_std = 0.2;
  return c;
}

inline ModelConfig small_gpt2_model(int64_t vocab) {
  ModelConfig c = small_llama_model(vocab);
  c.n_kv_heads = c.n_heads;
  c.ffn = FfnKind::kGelu;
  c.norm = NormKind::kLayerNorm;
  c.position = PositionKind::kLearned;
  c.bias = true;
  c.tie_embeddings = true;
  return c;
}

// The byte-level text model of the text contracts (vocab 259, d_model 32, 2 layers, 4 query and 2 KV heads,
// SwiGLU, RMSNorm), with `position` and `max_seq_len` positions.
inline ModelConfig small_byte_model(PositionKind position = PositionKind::kRope, int64_t max_seq_len = 64) {
  ModelConfig m;
  m.inputs = {InputField{"token", 259}};
  m.output_vocab = 259;
  m.d_model = 32;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn = FfnKind::kSwiglu;
  m.ffn_hidden = 88;
  m.norm = NormKind::kRmsNorm;
  m.position = position;
  m.max_seq_len = max_seq_len;
  return m;
}

}  // namespace causal::testing
