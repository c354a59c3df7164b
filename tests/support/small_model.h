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

}  // namespace causal::testing
