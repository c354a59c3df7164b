// Model section of the run config: every field declared once, with its default and a one-line comment.
// visit_fields() is the single list of fields that JSON in/out, --set overrides and docs walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/enums.h"

namespace causal {

// One input field of a position; the embeddings of all fields are summed (retrieval: key + value).
struct InputField {
  std::string name = "token";  // names the embedding table: parameter "embed.<name>.weight"
  int64_t vocab = 259;         // number of ids this field can take

  template <class V>
  void visit_fields(V& v) {
    v.field("name", name);
    v.field("vocab", vocab);
  }
};

struct RopeConfig {
  double theta = 10000.0;                           // base: pair i turns at theta^(-2i/dk) per position
  RopePairing pairing = RopePairing::kInterleaved;  // "interleaved": dims (2i,2i+1); "halves": (i, i+dk/2)
  RopeScaling scaling =
      RopeScaling::kNone;            // "none" | "linear" | "ntk" | "yarn" (docs/model.md#rope-scaling)
  double factor = 1.0;               // context extension factor s of the scaling
  int64_t original_max_seq_len = 0;  // yarn: trained length; 0 = model.max_seq_len (pinned in checkpoints)
  double beta_fast = 32.0;           // yarn: pairs turning more than this over the trained length extrapolate
  double beta_slow = 1.0;            // yarn: pairs turning less than this over the trained length interpolate

  template <class V>
  void visit_fields(V& v) {
    v.field("theta", theta);
    v.field("pairing", pairing);
    v.field("scaling", scaling);
    v.field("factor", factor);
    v.field("original_max_seq_len", original_max_seq_len);
    v.field("beta_fast", beta_fast);
    v.field("beta_slow", beta_slow);
  }
};

struct ModelConfig {
  std::vector<InputField> inputs = {InputField{}};  // summed input embeddings, one per field
  int64_t output_vocab = 259;                       // logits per position
  int64_t d_model = 128;                            // residual stream width
  int64_t n_layers = 2;                             // transformer blocks
  int64_t n_heads = 4;                              // query heads; head dim dk = d_model / n_heads
  int64_t n_kv_heads = 0;                           // key/value heads (GQA when < n_heads); 0 = n_heads
  FfnKind ffn = FfnKind::kGelu;                     // "gelu" (erf) | "gelu_tanh" | "swiglu" | "relu"
  int64_t ffn_hidden = 0;                           // 0 = 4d (gelu, relu) or 2/3*4d rounded up (swiglu)
  int64_t ffn_multiple_of = 8;                      // swiglu's default hidden width is rounded up to this
  NormKind norm = NormKind::kLayerNorm;             // "layernorm" | "rmsnorm"; always pre-norm + final norm
  double norm_eps = 1e-5;                           // added to the variance inside the norm
  PositionKind position = PositionKind::kRope;      // "none" | "learned" | "rope"
  int64_t max_seq_len = 256;                        // longest sequence (learned table size; checked for all)
  RopeConfig rope;                                  // used when position == "rope"
  // "reference" (explicit scores) | "sdpa" (LibTorch's fused op); extras "flash" (tiled online softmax),
  // "query_blocks" (the reference over two query halves)
  AttentionKind attention = AttentionKind::kReference;
  int64_t attention_block = 64;  // keys per block of "flash"
  int64_t attention_window = 0;  // > 0: sliding window, a query reads its latest `window` keys only
  AutocastKind autocast = AutocastKind::kOff;  // "bf16": matrix products in bfloat16, parameters stay fp32
  // "auto": causal's fused CUDA kernels where the build has them and the model is on a GPU; "aten": ATen's
  // operations only (docs/gpu.md#causals-own-kernels)
  ModelKernels kernels = ModelKernels::kAuto;
  // Under autocast, copies of the product weights in its dtype, made again only when a weight changes: "auto"
  // on a GPU, "on" on every device, "off" never (autocast casts them every forward);
  // docs/model.md#weight-shadows
  WeightShadows weight_shadows = WeightShadows::kAuto;
  bool qk_norm = false;         // RMS-normalise q and k per head before scoring
  bool bias = true;             // biases in linear layers and LayerNorm
  bool qkv_bias = false;        // biases on q/k/v_proj only (Qwen2); needs bias false
  bool tie_embeddings = false;  // head reuses the (single) input embedding
  double dropout = 0.0;         // on attention weights and residual branches (train only)
  double init_std = 0.02;       // normal(0, init_std); residual outputs / sqrt(2*n_layers)

  template <class V>
  void visit_fields(V& v) {
    v.field("inputs", inputs);
    v.field("output_vocab", output_vocab);
    v.field("d_model", d_model);
    v.field("n_layers", n_layers);
    v.field("n_heads", n_heads);
    v.field("n_kv_heads", n_kv_heads);
    v.field("ffn", ffn);
    v.field("ffn_hidden", ffn_hidden);
    v.field("ffn_multiple_of", ffn_multiple_of);
    v.field("norm", norm);
    v.field("norm_eps", norm_eps);
    v.field("position", position);
    v.field("max_seq_len", max_seq_len);
    v.field("rope", rope);
    v.field("attention", attention);
    v.field("attention_block", attention_block);
    v.field("attention_window", attention_window);
    v.field("autocast", autocast);
    v.field("kernels", kernels);
    v.field("weight_shadows", weight_shadows);
    v.field("qk_norm", qk_norm);
    v.field("bias", bias);
    v.field("qkv_bias", qkv_bias);
    v.field("tie_embeddings", tie_embeddings);
    v.field("dropout", dropout);
    v.field("init_std", init_std);
  }

  int64_t head_dim() const { return d_model / n_heads; }
};

}  // namespace causal
