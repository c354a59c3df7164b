// What a model costs, by arithmetic on a resolved ModelConfig (docs/background.md#cost-formulas): parameters,
// FLOPs per token and bytes. The one home of these formulas: validate() bounds sizes with them, and
// `causal inspect`, `causal bench` and the run's memory check report them. The model is never built.
#pragma once

#include <cstdint>
#include <string>

#include "config/model_config.h"
#include "config/train_config.h"

namespace causal {

// Parameters exactly as the model registers them (see docs/config.md for the layout). D = d_model.
struct ParameterCounts {
  int64_t embeddings = 0;           // sum over input fields of vocab * D
  int64_t positions = 0;            // learned table max_seq_len * D; 0 for "none" and "rope"
  int64_t attention_per_block = 0;  // q/k/v/o projections (+ biases), q_norm/k_norm when qk_norm
  int64_t norms_per_block = 0;      // attn_norm + ffn_norm
  int64_t ffn_per_block = 0;        // fc_in/fc_out (gelu) or gate/up/down (swiglu) (+ biases)
  int64_t per_block = 0;            // attention + norms + ffn
  int64_t blocks = 0;               // n_layers * per_block
  int64_t final_norm = 0;
  int64_t head = 0;  // D * output_vocab (+ bias); 0 when tied to an input embedding
  int64_t total = 0;
  int64_t matmul = 0;  // weights a token is multiplied by: block projections + head (also when tied)
  // LoRA (train.lora.rank r > 0): r (in + out) per adapted product, on top of `total`; 0 without.
  int64_t adapters = 0;
  int64_t trainable = 0;  // what gets gradients and AdamW state: `adapters` with LoRA, else `total`
  // LoRA's frozen product weights (block projections, an untied head) that train.lora.base_dtype holds in
  // less than float32; 0 without LoRA or with "f32". Embeddings, norms and biases stay float32.
  int64_t held = 0;
};

// Multiply-adds count as two FLOPs. "causal" variants count only the keys a causal pass computes.
struct FlopsPerToken {
  int64_t context = 0;                // T
  int64_t attention_projections = 0;  // per block: 2 x q/k/v/o weights
  int64_t attention_scores =
      0;  // per block: 4*T*D for QK^T and PV over all T keys (docs/background.md#flops-per-token)
  int64_t attention_scores_causal =
      0;                       // per block: 2*(T+1)*D, the mean over the T positions of a causal pass
  int64_t ffn = 0;             // per block: 2 x ffn weights
  int64_t head = 0;            // 2 x D x output_vocab
  int64_t forward = 0;         // 2 x matmul parameters + n_layers * attention_scores
  int64_t forward_causal = 0;  // 2 x matmul parameters + n_layers * attention_scores_causal
  // 3 x forward: the backward pass costs about two forwards. With LoRA the frozen weights get no weight
  // gradient (2 x matmul less) and the adapters cost 3 x their forward (2 x adapters).
  int64_t training = 0;
  int64_t training_causal = 0;  // the same over forward_causal
};

// Bytes, exact, except `activations`, an estimate (kernels and the allocator decide the real figure; the
// run's metrics log the measured peak).
struct MemoryPlan {
  int64_t bytes_per_element = 0;  // of parameters, gradients and the KV cache
  // (total - held + adapters) * bytes_per_element + held * base_dtype_bytes(train.lora.base_dtype)
  int64_t parameters = 0;
  int64_t gradients = 0;    // one gradient per trainable parameter, same dtype
  int64_t optimizer = 0;    // AdamW: two fp32 moments per trainable parameter (8 bytes)
  int64_t kv_cache = 0;     // kv_cache_bytes(B, L, T, Hkv, dk, bytes_per_element)
  int64_t activations = 0;  // activation_bytes(model, B, T, bytes_per_element)
  int64_t training = 0;     // parameters + gradients + optimizer
  int64_t inference = 0;    // parameters + kv_cache
};

// Rough compute-optimal sizing (Chinchilla, docs/background.md#compute-optimal-sizing): D ~ 20 N tokens, C ~
// 6 N D FLOPs.
struct ScalingEstimate {
  int64_t compute_optimal_tokens = 0;  // 20 * total parameters
  double compute_optimal_flops = 0;    // 6 * N * D at that D (a double: it passes int64 from ~0.7B params)
};

// Every figure for a micro-batch of `batch` sequences of `flops.context` positions.
struct ModelCost {
  int64_t batch = 1;
  ParameterCounts parameters;
  FlopsPerToken flops;
  MemoryPlan memory;
  ScalingEstimate scaling;
};

// Each figure is computed in double, so no size overflows; it is stored in int64, exact while below 2^53
// (every model that fits a machine). check_cost_size refuses sizes whose figures reach kLargestCostFigure,
// which int64 holds with room for the sums the callers make (training_bytes).
inline constexpr double kLargestCostFigure = 4611686018427387904.0;  // 2^62

// 2 * batch * layers * context * kv_heads * head_dim * bytes: K and V for every cached position.
double kv_cache_bytes(int64_t batch, int64_t layers, int64_t context, int64_t kv_heads, int64_t head_dim,
                      int64_t bytes_per_element);

// The activation memory a training micro-batch of B x T keeps for backward with the reference kernel, the
// only formula for it: per block B*T*(6D + 2*Hkv*dk + c*F) + 2*B*Hq*T^2 (c = 2 gelu and relu, 4 swiglu),
// plus B*T*(3D + 2V) for embeddings, final norm, logits and their softmax; times bytes_per_element.
// With LoRA, each adapter also keeps its B*T*r intermediate (and its B*T*in dropped input with dropout), and
// an adapted head its folded (V, D) weight and that weight's gradient.
double activation_bytes(const ModelConfig& resolved, int64_t batch, int64_t context,
                        int64_t bytes_per_element, const LoraConfig& lora = {});

// Bytes per weight that train.lora.base_dtype holds a frozen product weight in: f32 4, bf16 2, and ggml's
// block bytes over block elements: q8_0 34/32, q4_0 18/32, q4_1 20/32, q4_k 144/256.
double base_dtype_bytes(BaseDtype dtype);
// Elements per block of `dtype` (1 for f32 and bf16): a held weight's rows (of d_model or ffn_hidden
// values) are whole blocks.
int64_t base_dtype_block(BaseDtype dtype);

// The LoRA parameters train.lora adds to `resolved`: r (in + out) for every targeted product (q D -> Hq*dk,
// k and v D -> Hkv*dk, o Hq*dk -> D, gate and up D -> F, down F -> D, head D -> V; gate only in a SwiGLU
// FFN). 0 for rank 0.
int64_t lora_parameters(const ModelConfig& resolved, const LoraConfig& lora);

// Every figure of `resolved` (n_kv_heads and ffn_hidden filled in, sizes passed by check_cost_size) for
// `batch` sequences of `context` positions, with parameters, gradients and the KV cache in
// `bytes_per_element`; with `lora` (rank > 0) the adapters train and the rest is frozen.
ModelCost model_cost(const ModelConfig& resolved, int64_t context, int64_t batch, int64_t bytes_per_element,
                     const LoraConfig& lora = {});

// The one size check of the cost figures: throws ConfigError from `source` when a figure of
// model_cost(resolved, context, batch, 4) would reach kLargestCostFigure. It names the model's sizes (at
// model.d_model) when one sequence already does, else `batch_path` and the batch.
void check_cost_size(const ModelConfig& resolved, int64_t context, int64_t batch, const std::string& source,
                     const std::string& batch_path);

}  // namespace causal
