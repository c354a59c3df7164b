// Parameter counts, FLOPs, KV-cache and activation bytes by arithmetic on a resolved ModelConfig, in double.
#include "config/cost_model.h"

#include <algorithm>

#include "core/errors.h"

namespace causal {
namespace {

// model_cost's figures and the largest of them, which check_cost_size compares: one computation for both.
struct CostFigures {
  ModelCost cost;
  double largest = 0;
};

// Per adapted product (in, out) of train.lora's targets, once per block (or once for the head).
struct AdaptedProducts {
  double per_block_sum = 0;  // sum of in + out over a block's adapted products
  double per_block_in = 0;   // sum of in
  double per_block_out = 0;  // sum of out
  double per_block_count = 0;
  double head_sum = 0, head_in = 0, head_out = 0, head_count = 0;
};

AdaptedProducts adapted_products(const ModelConfig& m, const LoraConfig& lora) {
  AdaptedProducts out;
  if (lora.rank <= 0) return out;
  const double d = static_cast<double>(m.d_model), dk = static_cast<double>(m.head_dim());
  const double q = static_cast<double>(m.n_heads) * dk, kv = static_cast<double>(m.n_kv_heads) * dk;
  const double h = static_cast<double>(m.ffn_hidden);
  const bool swiglu = m.ffn == FfnKind::kSwiglu;
  for (const std::string& target : lora.targets) {
    double in = 0, o = 0;
    if (target == "q") in = d, o = q;
    if (target == "k" || target == "v") in = d, o = kv;
    if (target == "o") in = q, o = d;
    if ((target == "gate" && swiglu) || target == "up") in = d, o = h;
    if (target == "down") in = h, o = d;
    if (target == "head" && !m.tie_embeddings) {
      out.head_sum = d + static_cast<double>(m.output_vocab), out.head_in = d;
      out.head_out = static_cast<double>(m.output_vocab), out.head_count = 1;
      continue;
    }
    if (in == 0) continue;
    out.per_block_sum += in + o;
    out.per_block_in += in;
    out.per_block_out += o;
    out.per_block_count += 1;
  }
  return out;
}

CostFigures cost_figures(const ModelConfig& m, int64_t context, int64_t batch, int64_t bytes_per_element,
                         const LoraConfig& lora) {
  CostFigures out;
  // Every figure passes through here: the largest is kept, and a figure past kLargestCostFigure (refused by
  // check_cost_size) is clamped rather than converted out of int64's range.
  auto put = [&](int64_t& field, double value) {
    out.largest = std::max(out.largest, value);
    field = static_cast<int64_t>(std::min(value, kLargestCostFigure));
  };
  const double d = static_cast<double>(m.d_model), dk = static_cast<double>(m.head_dim());
  const double hq = static_cast<double>(m.n_heads), hkv = static_cast<double>(m.n_kv_heads);
  const double h = static_cast<double>(m.ffn_hidden), layers = static_cast<double>(m.n_layers);
  const double v = static_cast<double>(m.output_vocab), t = static_cast<double>(context);
  const double bias = m.bias ? 1 : 0;
  const bool swiglu = m.ffn == FfnKind::kSwiglu;

  // Parameters. q (D -> Hq*dk), k and v (D -> Hkv*dk), o (Hq*dk -> D); a Linear(in -> out) has in * out
  // weights and its bias is counted apart.
  double embeddings = 0;
  for (const InputField& field : m.inputs) embeddings += static_cast<double>(field.vocab) * d;
  const double positions = m.position == PositionKind::kLearned ? static_cast<double>(m.max_seq_len) * d : 0;
  const double attention_weights = d * hq * dk + 2 * d * hkv * dk + hq * dk * d;
  const double qkv_bias = m.bias || m.qkv_bias ? 1 : 0;
  const double qk_norms = m.qk_norm ? 2 * dk : 0;  // RMSNorm weights over dk, shared by all heads
  const double attention = attention_weights + qkv_bias * (hq * dk + 2 * hkv * dk) + bias * d + qk_norms;
  // attn_norm, ffn_norm and final_norm: LayerNorm has a bias only with model.bias; RMSNorm never does.
  const double norm = d * (m.norm == NormKind::kLayerNorm && m.bias ? 2 : 1);
  // gelu, gelu_tanh, relu: fc_in (D -> h), fc_out (h -> D); swiglu: gate_proj and up_proj (D -> h),
  // down_proj (h -> D).
  const double ffn_weights = (swiglu ? 2 : 1) * d * h + h * d;
  const double ffn = ffn_weights + bias * ((swiglu ? 2 : 1) * h + d);
  const double per_block = attention + 2 * norm + ffn;
  const double head = m.tie_embeddings ? 0 : d * v + bias * v;
  const double total = embeddings + positions + layers * per_block + norm + head;
  // A tied head still multiplies every token by the (V, D) embedding matrix.
  const double matmul = layers * (attention_weights + ffn_weights) + d * v;
  ParameterCounts& p = out.cost.parameters;
  put(p.embeddings, embeddings);
  put(p.positions, positions);
  put(p.attention_per_block, attention);
  put(p.norms_per_block, 2 * norm);
  put(p.ffn_per_block, ffn);
  put(p.per_block, per_block);
  put(p.blocks, layers * per_block);
  put(p.final_norm, norm);
  put(p.head, head);
  put(p.total, total);
  put(p.matmul, matmul);
  const AdaptedProducts adapted = adapted_products(m, lora);
  const double r = lora.rank > 0 ? static_cast<double>(lora.rank) : 0;
  // DoRA adds a magnitude per output row of each adapted product.
  const double magnitudes = lora.dora ? layers * adapted.per_block_out + adapted.head_out : 0;
  const double adapters = r * (layers * adapted.per_block_sum + adapted.head_sum) + magnitudes;
  const double trainable = lora.rank > 0 ? adapters : total;
  put(p.adapters, adapters);
  put(p.trainable, trainable);
  // What train.lora.base_dtype holds: every product weight but a tied head's (the embedding).
  const bool holds = lora.rank > 0 && lora.base_dtype != BaseDtype::kF32;
  const double held = holds ? layers * (attention_weights + ffn_weights) + (m.tie_embeddings ? 0 : d * v) : 0;
  put(p.held, held);

  // FLOPs per token. Scores QK^T and the weighted sum PV: 2 FLOPs x T keys x D (= Hq*dk) each; position i
  // (0-based) of a causal pass sees i+1 keys, (T+1)/2 on average.
  FlopsPerToken& f = out.cost.flops;
  f.context = context;
  const double scores = 4 * t * d, scores_causal = 2 * (t + 1) * d;
  const double forward = 2 * matmul + layers * scores, forward_causal = 2 * matmul + layers * scores_causal;
  put(f.attention_projections, 2 * (2 * d * hq * dk + 2 * d * hkv * dk));
  put(f.attention_scores, scores);
  put(f.attention_scores_causal, scores_causal);
  put(f.ffn, 2 * (swiglu ? 3 : 2) * d * h);
  put(f.head, 2 * d * v);
  put(f.forward, forward);
  put(f.forward_causal, forward_causal);
  // A frozen weight costs no weight gradient; the adapters' two small products cost 3 x as any product.
  const double frozen_saving = lora.rank > 0 ? 2 * matmul - 6 * adapters : 0;
  put(f.training, 3 * forward - frozen_saving);
  put(f.training_causal, 3 * forward_causal - frozen_saving);

  // Bytes.
  MemoryPlan& mem = out.cost.memory;
  const double e = static_cast<double>(bytes_per_element);
  const double kv_cache =
      kv_cache_bytes(batch, m.n_layers, context, m.n_kv_heads, m.head_dim(), bytes_per_element);
  mem.bytes_per_element = bytes_per_element;
  const double parameter_bytes = (total - held + adapters) * e + held * base_dtype_bytes(lora.base_dtype);
  put(mem.parameters, parameter_bytes);
  put(mem.gradients, trainable * e);
  put(mem.optimizer, trainable * 2 * 4);
  put(mem.kv_cache, kv_cache);
  put(mem.activations, activation_bytes(m, batch, context, bytes_per_element, lora));
  put(mem.training, parameter_bytes + trainable * (e + 8));
  put(mem.inference, parameter_bytes + kv_cache);

  out.cost.batch = batch;
  put(out.cost.scaling.compute_optimal_tokens, 20 * total);
  out.cost.scaling.compute_optimal_flops = 6 * total * (20 * total);
  return out;
}

}  // namespace

double kv_cache_bytes(int64_t batch, int64_t layers, int64_t context, int64_t kv_heads, int64_t head_dim,
                      int64_t bytes_per_element) {
  return 2 * static_cast<double>(batch) * static_cast<double>(layers) * static_cast<double>(context) *
         static_cast<double>(kv_heads) * static_cast<double>(head_dim) *
         static_cast<double>(bytes_per_element);
}

double base_dtype_bytes(BaseDtype dtype) {
  switch (dtype) {
    case BaseDtype::kF32:
      return 4;
    case BaseDtype::kBf16:
      return 2;
    case BaseDtype::kQ8_0:
      return 34.0 / 32;  // float16 d + 32 int8
    case BaseDtype::kQ4_0:
      return 18.0 / 32;  // float16 d + 32 nibbles
    case BaseDtype::kQ4_1:
      return 20.0 / 32;  // float16 d and m + 32 nibbles
    case BaseDtype::kQ4_K:
      return 144.0 / 256;  // float16 d and dmin, 12 bytes of 6-bit scales and mins, 256 nibbles
  }
  return 4;
}

int64_t base_dtype_block(BaseDtype dtype) {
  switch (dtype) {
    case BaseDtype::kQ8_0:
    case BaseDtype::kQ4_0:
    case BaseDtype::kQ4_1:
      return 32;
    case BaseDtype::kQ4_K:
      return 256;
    default:
      return 1;
  }
}

int64_t lora_parameters(const ModelConfig& m, const LoraConfig& lora) {
  return cost_figures(m, 1, 1, 4, lora).cost.parameters.adapters;
}

double activation_bytes(const ModelConfig& m, int64_t batch, int64_t context, int64_t bytes_per_element,
                        const LoraConfig& lora) {
  const double b = static_cast<double>(batch), t = static_cast<double>(context), bt = b * t;
  const double d = static_cast<double>(m.d_model), dk = static_cast<double>(m.head_dim());
  const double c = m.ffn == FfnKind::kSwiglu ? 4 : 2;
  const double per_block =
      bt * (6 * d + 2 * static_cast<double>(m.n_kv_heads) * dk + c * static_cast<double>(m.ffn_hidden)) +
      2 * b * static_cast<double>(m.n_heads) * t * t;
  const double outside_blocks = bt * (3 * d + 2 * static_cast<double>(m.output_vocab));
  // An adapter keeps x A^T for B's gradient, and with dropout the dropped input it multiplied; DoRA's
  // x (W + s B A)^T too, for the magnitude's gradient.
  const AdaptedProducts adapted = adapted_products(m, lora);
  const double r = lora.rank > 0 ? static_cast<double>(lora.rank) : 0, dropped = lora.dropout > 0 ? 1 : 0;
  const double dora = lora.rank > 0 && lora.dora ? 1 : 0;
  // An adapted head enters the chunked loss as its folded weight W + s B A, with that weight's gradient.
  const double adapters =
      bt * (static_cast<double>(m.n_layers) * (r * adapted.per_block_count + dropped * adapted.per_block_in +
                                               dora * adapted.per_block_out) +
            r * adapted.head_count + dropped * adapted.head_in + dora * adapted.head_out) +
      adapted.head_count * 2 * d * static_cast<double>(m.output_vocab);
  // A held untied head (train.lora.base_dtype) enters the chunked loss dequantized whole, (V, D) float32
  // for the loss's length; a held product's tile, (256, in) float32, is noise beside it.
  const bool held_head = lora.rank > 0 && lora.base_dtype != BaseDtype::kF32 && !m.tie_embeddings;
  const double dequantized_head = held_head ? d * static_cast<double>(m.output_vocab) : 0;
  return (static_cast<double>(m.n_layers) * per_block + outside_blocks + adapters + dequantized_head) *
         static_cast<double>(bytes_per_element);
}

ModelCost model_cost(const ModelConfig& resolved, int64_t context, int64_t batch, int64_t bytes_per_element,
                     const LoraConfig& lora) {
  return cost_figures(resolved, context, batch, bytes_per_element, lora).cost;
}

void check_cost_size(const ModelConfig& m, int64_t context, int64_t batch, const std::string& source,
                     const std::string& batch_path) {
  // 4 bytes per element: the widest dtype gives the largest figures.
  if (cost_figures(m, context, 1, 4, {}).largest >= kLargestCostFigure) {
    throw ConfigError(source, "model.d_model",
                      "model.d_model " + std::to_string(m.d_model) + ", model.n_layers " +
                          std::to_string(m.n_layers) + ", model.ffn_hidden " + std::to_string(m.ffn_hidden) +
                          " and model.max_seq_len " + std::to_string(m.max_seq_len) +
                          " describe a model too large to count in 64-bit integers (more than 2^62 bytes or "
                          "FLOPs); reduce them");
  }
  if (batch > 1 && cost_figures(m, context, batch, 4, {}).largest >= kLargestCostFigure) {
    throw ConfigError(source, batch_path,
                      std::to_string(batch) + " sequences of " + std::to_string(context) +
                          " positions of this model need more than 2^62 bytes of activations; reduce it");
  }
}

}  // namespace causal
