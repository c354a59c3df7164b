// `causal inspect` figures from a ModelConfig by the formulas of docs/background.md#cost-formulas; the model
// is never built (any size is instant).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "config/model_config.h"

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
};

// Multiply-adds count as two FLOPs. "causal" variants count only the keys a causal pass computes.
struct FlopsPerToken {
  int64_t context = 0;                // T
  int64_t attention_projections = 0;  // per block: 2 x q/k/v/o weights
  int64_t attention_scores =
      0;  // per block: 4*T*D for QK^T and PV over all T keys (docs/background.md#flops-per-token)
  int64_t attention_scores_causal =
      0;                        // per block: 2*(T+1)*D, the mean over the T positions of a causal pass
  int64_t ffn = 0;              // per block: 2 x ffn weights
  int64_t head = 0;             // 2 x D x output_vocab
  int64_t forward = 0;          // 2 x matmul parameters + n_layers * attention_scores
  int64_t forward_causal = 0;   // 2 x matmul parameters + n_layers * attention_scores_causal
  int64_t training = 0;         // 3 x forward: the backward pass costs about two forwards
  int64_t training_causal = 0;  // 3 x forward_causal
};

// Bytes, exact, except `activations`, an estimate (kernels and the allocator decide the real figure; the
// run's metrics log the measured peak).
struct MemoryPlan {
  int64_t bytes_per_element = 0;  // of parameters, gradients and the KV cache
  int64_t parameters = 0;         // total parameters * bytes_per_element
  int64_t gradients = 0;          // one gradient per parameter, same dtype
  int64_t optimizer = 0;          // AdamW: two fp32 moments per parameter (8 bytes)
  int64_t kv_cache = 0;           // 2 * B * L * T * Hkv * dk * bytes_per_element
  // Tensors a training micro-batch of B x T keeps for backward with the reference kernel, per block
  // B*T*(6D + 2*Hkv*dk + c*F) + 2*B*Hq*T^2 (c = 2 gelu, 4 swiglu), plus B*T*(3D + 2V) for embeddings, final
  // norm, logits and their softmax.
  int64_t activations = 0;
  int64_t training = 0;   // parameters + gradients + optimizer
  int64_t inference = 0;  // parameters + kv_cache
};

// Rough compute-optimal sizing (Chinchilla, docs/background.md#compute-optimal-sizing): D ~ 20 N tokens, C ~
// 6 N D FLOPs.
struct ScalingEstimate {
  int64_t compute_optimal_tokens = 0;  // 20 * total parameters
  double compute_optimal_flops = 0;    // 6 * N * D at that D (a double: it overflows int64 from ~0.7B params)
};

struct InspectReport {
  ModelConfig model;  // resolved (n_kv_heads, ffn_hidden filled in)
  int64_t batch = 1;
  std::string dtype = "fp32";
  ParameterCounts parameters;
  FlopsPerToken flops;
  MemoryPlan memory;
  ScalingEstimate scaling;
};

// 4 for "fp32", 2 for "bf16" and "fp16"; anything else throws ConfigError (source "--dtype").
int64_t bytes_per_element(const std::string& dtype);

// 2 * batch * layers * context * kv_heads * head_dim * bytes: K and V for every cached position.
int64_t kv_cache_bytes(int64_t batch, int64_t layers, int64_t context, int64_t kv_heads, int64_t head_dim,
                       int64_t bytes_per_element);

// Resolves and validates a copy of `model` (ConfigError if invalid), then counts its parameters.
ParameterCounts parameter_counts(const ModelConfig& model);

// The full report for context T (0 = model.max_seq_len; must not exceed it), batch B and dtype.
// Throws ConfigError for an invalid model, context, batch or dtype.
InspectReport inspect_model(const ModelConfig& model, int64_t context = 0, int64_t batch = 1,
                            const std::string& dtype = "fp32");

// Bytes a training step holds by the plan: parameters + gradients + AdamW state + activations.
int64_t training_bytes(const MemoryPlan& memory);

// Throws ConfigError (one line naming model.d_model, model.n_layers, train.batch_size and the estimate in
// GiB) when training_bytes(report.memory) exceeds `memory_bytes`, which `where` describes ("this
// machine"). memory_bytes <= 0 (unknown) passes. Called before the model is built, so nothing is allocated.
void check_training_memory(const InspectReport& report, int64_t memory_bytes, const std::string& where);

// Human table: exact integers, with MiB/GiB (bytes) and K/M/G (counts) beside them.
std::string format_inspect(const InspectReport& report);

// Every figure of the report as one JSON object (for `inspect --json`).
nlohmann::json inspect_to_json(const InspectReport& report);

}  // namespace causal
