// Parameter counts, FLOPs, KV-cache bytes and memory plan by arithmetic on a resolved ModelConfig.
#include "bench/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/config_io.h"

namespace causal {
namespace {

// The model's own resolution and checks, so counts never describe a model that could not be built.
ModelConfig resolved(const ModelConfig& model) {
  RunConfig run;
  run.model = model;
  resolve(run);
  validate(run, "inspect", ConfigScope::kModel);
  return run.model;
}

// attn_norm, ffn_norm and final_norm: LayerNorm has a bias only when config.bias; RMSNorm never does.
int64_t norm_parameters(const ModelConfig& m) {
  const bool has_bias = m.norm == NormKind::kLayerNorm && m.bias;
  return m.d_model * (has_bias ? 2 : 1);
}

// Weights of a Linear(in -> out); its bias is counted separately.
int64_t linear(int64_t in, int64_t out) { return in * out; }

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (value < 0 ? "-" : "") + out;
}

std::string fixed2(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.2f", value);
  return buffer;
}

// MiB below one GiB, GiB from there on (binary units, as in docs/background.md#kv-cache-bytes).
std::string human_bytes(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (mib < 1024.0) return fixed2(mib) + " MiB";
  return fixed2(mib / 1024.0) + " GiB";
}

// Decimal units for counts: 1.23 K / M / G / T / P / E / Z.
std::string human_count(double value, const std::string& unit) {
  const char* prefixes[] = {"", " K", " M", " G", " T", " P", " E", " Z"};
  const int last = static_cast<int>(sizeof(prefixes) / sizeof(prefixes[0])) - 1;
  int i = 0;
  while (value >= 1000.0 && i < last) {
    value /= 1000.0;
    ++i;
  }
  return fixed2(value) + prefixes[i] + (unit.empty() ? "" : (i == 0 ? " " : "") + unit);
}

std::string pad_right(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? " " + s : std::string(width - s.size(), ' ') + s;
}

constexpr std::size_t kLabel = 44;   // label column
constexpr std::size_t kNumber = 22;  // each number column

}  // namespace

int64_t bytes_per_element(const std::string& dtype) {
  if (dtype == "fp32") return 4;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  throw ConfigError("--dtype", "", "expected one of fp32|bf16|fp16, got \"" + dtype + "\"");
}

int64_t kv_cache_bytes(int64_t batch, int64_t layers, int64_t context, int64_t kv_heads, int64_t head_dim,
                       int64_t bytes_per_element) {
  return 2 * batch * layers * context * kv_heads * head_dim * bytes_per_element;
}

ParameterCounts parameter_counts(const ModelConfig& model) {
  const ModelConfig m = resolved(model);
  const int64_t d = m.d_model, dk = m.head_dim(), hq = m.n_heads, hkv = m.n_kv_heads, h = m.ffn_hidden;
  const int64_t bias = m.bias ? 1 : 0;
  ParameterCounts p;
  for (const InputField& field : m.inputs) p.embeddings += linear(field.vocab, d);
  p.positions = m.position == PositionKind::kLearned ? linear(m.max_seq_len, d) : 0;

  // q (D -> Hq*dk), k and v (D -> Hkv*dk), o (Hq*dk -> D).
  const int64_t attention_weights = linear(d, hq * dk) + 2 * linear(d, hkv * dk) + linear(hq * dk, d);
  const int64_t qkv_bias = m.bias || m.qkv_bias ? 1 : 0;
  const int64_t attention_biases = qkv_bias * (hq * dk + 2 * hkv * dk) + bias * d;
  const int64_t qk_norms = m.qk_norm ? 2 * dk : 0;  // RMSNorm weights over dk, shared by all heads
  p.attention_per_block = attention_weights + attention_biases + qk_norms;
  p.norms_per_block = 2 * norm_parameters(m);

  // gelu, gelu_tanh, relu: fc_in (D -> h), fc_out (h -> D); swiglu: gate_proj and up_proj (D -> h),
  // down_proj (h -> D).
  const bool swiglu = m.ffn == FfnKind::kSwiglu;
  const int64_t ffn_weights = (swiglu ? 2 : 1) * linear(d, h) + linear(h, d);
  const int64_t ffn_biases = bias * ((swiglu ? 2 : 1) * h + d);
  p.ffn_per_block = ffn_weights + ffn_biases;

  p.per_block = p.attention_per_block + p.norms_per_block + p.ffn_per_block;
  p.blocks = m.n_layers * p.per_block;
  p.final_norm = norm_parameters(m);
  p.head = m.tie_embeddings ? 0 : linear(d, m.output_vocab) + bias * m.output_vocab;
  p.total = p.embeddings + p.positions + p.blocks + p.final_norm + p.head;
  // A tied head still multiplies every token by the (V, D) embedding matrix.
  p.matmul = m.n_layers * (attention_weights + ffn_weights) + linear(d, m.output_vocab);
  return p;
}

InspectReport inspect_model(const ModelConfig& model, int64_t context, int64_t batch,
                            const std::string& dtype) {
  InspectReport r;
  r.model = resolved(model);
  const ModelConfig& m = r.model;
  const int64_t t = context == 0 ? m.max_seq_len : context;
  if (t < 1 || t > m.max_seq_len) {
    throw ConfigError("--context", "",
                      "must be in [1, model.max_seq_len = " + std::to_string(m.max_seq_len) +
                          "] (0 = max_seq_len), got " + std::to_string(context));
  }
  if (batch < 1) throw ConfigError("--batch", "", "must be >= 1, got " + std::to_string(batch));
  {
    // validate() bounds one sequence's figures below 2^62; `batch` of them must stay below it too.
    const int64_t per_sequence = std::max<int64_t>(
        1, std::max((m.n_layers * (t * (8 * m.d_model + 4 * m.ffn_hidden) + 2 * m.n_heads * t * t) +
                     t * (3 * m.d_model + 2 * m.output_vocab)) *
                        8,
                    2 * m.n_layers * t * m.n_kv_heads * m.head_dim() * 8));
    if (batch > (int64_t{1} << 62) / per_sequence) {
      throw ConfigError("--batch", "",
                        std::to_string(batch) +
                            " sequences of this model need more than 2^62 bytes of activations; reduce it");
    }
  }
  r.batch = batch;
  r.dtype = dtype;
  const int64_t b = bytes_per_element(dtype);
  r.parameters = parameter_counts(m);
  const ParameterCounts& p = r.parameters;

  const int64_t d = m.d_model, dk = m.head_dim(), h = m.ffn_hidden;
  FlopsPerToken& f = r.flops;
  f.context = t;
  f.attention_projections = 2 * (2 * d * m.n_heads * dk + 2 * d * m.n_kv_heads * dk);
  // Scores QK^T and the weighted sum PV: 2 FLOPs x T keys x D (= Hq*dk) each, per token.
  f.attention_scores = 4 * t * d;
  // Position i (0-based) sees i+1 keys; the mean over T positions is (T+1)/2 keys.
  f.attention_scores_causal = 2 * (t + 1) * d;
  f.ffn = 2 * (m.ffn == FfnKind::kSwiglu ? 3 : 2) * d * h;
  f.head = 2 * d * m.output_vocab;
  f.forward = 2 * p.matmul + m.n_layers * f.attention_scores;
  f.forward_causal = 2 * p.matmul + m.n_layers * f.attention_scores_causal;
  f.training = 3 * f.forward;
  f.training_causal = 3 * f.forward_causal;

  MemoryPlan& mem = r.memory;
  mem.bytes_per_element = b;
  mem.parameters = p.total * b;
  mem.gradients = p.total * b;
  mem.optimizer = p.total * 2 * 4;
  mem.kv_cache = kv_cache_bytes(batch, m.n_layers, t, m.n_kv_heads, dk, b);
  mem.training = mem.parameters + mem.gradients + mem.optimizer;
  {
    const int64_t bt = batch * t, c = m.ffn == FfnKind::kSwiglu ? 4 : 2;
    const int64_t per_block =
        bt * (6 * m.d_model + 2 * m.n_kv_heads * dk + c * m.ffn_hidden) + 2 * batch * m.n_heads * t * t;
    mem.activations = (m.n_layers * per_block + bt * (3 * m.d_model + 2 * m.output_vocab)) * b;
  }
  mem.inference = mem.parameters + mem.kv_cache;

  r.scaling.compute_optimal_tokens = 20 * p.total;
  r.scaling.compute_optimal_flops = 6.0 * static_cast<double>(p.total) * static_cast<double>(20 * p.total);
  return r;
}

int64_t training_bytes(const MemoryPlan& memory) { return memory.training + memory.activations; }

void check_training_memory(const InspectReport& r, int64_t memory_bytes, const std::string& where) {
  const int64_t needed = training_bytes(r.memory);
  if (memory_bytes <= 0 || needed <= memory_bytes) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  auto gib = [&](int64_t bytes) { return fixed2(static_cast<double>(bytes) / kGiB) + " GiB"; };
  throw ConfigError(
      "memory", "model.d_model, model.n_layers, train.batch_size",
      "training needs about " + gib(needed) + " (parameters " + gib(r.memory.parameters) + " + gradients " +
          gib(r.memory.gradients) + " + AdamW state " + gib(r.memory.optimizer) + " + activations " +
          gib(r.memory.activations) + " for a micro-batch of " + std::to_string(r.batch) + " x " +
          std::to_string(r.flops.context) + ", estimate of `causal inspect`) but " + where + " has " +
          gib(memory_bytes) + "; reduce model.d_model (" + std::to_string(r.model.d_model) +
          "), model.n_layers (" + std::to_string(r.model.n_layers) + ") or train.batch_size (" +
          std::to_string(r.batch) + ")");
}

std::string format_inspect(const InspectReport& r) {
  const ModelConfig& m = r.model;
  const ParameterCounts& p = r.parameters;
  const FlopsPerToken& f = r.flops;
  const MemoryPlan& mem = r.memory;
  std::ostringstream out;
  auto row = [&](const std::string& label, const std::string& a, const std::string& b = "") {
    out << pad_right("  " + label, kLabel) << pad_left(a, kNumber) << (b.empty() ? "" : pad_left(b, kNumber))
        << "\n";
  };

  std::string inputs;
  for (const InputField& field : m.inputs) {
    inputs += (inputs.empty() ? "" : " + ") + field.name + " " + std::to_string(field.vocab);
  }
  out << "model: d_model " << m.d_model << ", n_layers " << m.n_layers << ", n_heads " << m.n_heads
      << ", n_kv_heads " << m.n_kv_heads << ", head dim " << m.head_dim() << ", ffn " << to_string(m.ffn)
      << " hidden " << m.ffn_hidden << ", " << to_string(m.norm) << ", position " << to_string(m.position)
      << ", max_seq_len " << m.max_seq_len
      << (m.bias       ? ", biases"
          : m.qkv_bias ? ", q/k/v biases"
                       : ", no biases")
      << (m.qk_norm ? ", qk_norm" : "") << (m.tie_embeddings ? ", tied head" : "") << "\n\n";

  out << pad_right("parameters", kLabel) << pad_left("count", kNumber) << "\n";
  row("embeddings (" + inputs + ")", with_commas(p.embeddings));
  row("position table", with_commas(p.positions));
  row("per block: attention", with_commas(p.attention_per_block));
  row("per block: norms", with_commas(p.norms_per_block));
  row("per block: ffn", with_commas(p.ffn_per_block));
  row("blocks (" + std::to_string(m.n_layers) + " x " + with_commas(p.per_block) + ")",
      with_commas(p.blocks));
  row("final norm", with_commas(p.final_norm));
  row(m.tie_embeddings ? "head (tied to the embedding)" : "head", with_commas(p.head));
  row("total (" + human_count(static_cast<double>(p.total), "") + ")", with_commas(p.total));
  out << "\n";

  out << pad_right("FLOPs per token at context T = " + std::to_string(f.context), kLabel)
      << pad_left("all keys (4TD)", kNumber) << pad_left("causal (2(T+1)D)", kNumber) << "\n";
  row("per block: attention projections", with_commas(f.attention_projections),
      with_commas(f.attention_projections));
  row("per block: attention scores + values", with_commas(f.attention_scores),
      with_commas(f.attention_scores_causal));
  row("per block: ffn", with_commas(f.ffn), with_commas(f.ffn));
  row("head", with_commas(f.head), with_commas(f.head));
  row("forward (" + human_count(static_cast<double>(f.forward), "FLOP") + ")", with_commas(f.forward),
      with_commas(f.forward_causal));
  row("training, 3 x forward (" + human_count(static_cast<double>(f.training), "FLOP") + ")",
      with_commas(f.training), with_commas(f.training_causal));
  out << "\n";

  out << pad_right("memory (" + r.dtype + ", batch " + std::to_string(r.batch) + ", context " +
                       std::to_string(f.context) + ")",
                   kLabel)
      << pad_left("bytes", kNumber) << "\n";
  row("parameters", with_commas(mem.parameters), human_bytes(mem.parameters));
  row("gradients", with_commas(mem.gradients), human_bytes(mem.gradients));
  row("AdamW moments (2 x fp32)", with_commas(mem.optimizer), human_bytes(mem.optimizer));
  row("KV cache (2 B L T Hkv dk bytes)", with_commas(mem.kv_cache), human_bytes(mem.kv_cache));
  row("training: params + grads + AdamW", with_commas(mem.training), human_bytes(mem.training));
  row("activations per micro-batch (est.)", with_commas(mem.activations), human_bytes(mem.activations));
  row("inference: params + KV cache", with_commas(mem.inference), human_bytes(mem.inference));
  out << "  (activations: an estimate of what backward keeps, reference kernel; runs log the measured peak "
         "RSS)\n\n";

  out << "compute-optimal (Chinchilla, D ~ 20 N): " << with_commas(r.scaling.compute_optimal_tokens)
      << " tokens, C ~ 6 N D = " << human_count(r.scaling.compute_optimal_flops, "FLOP");
  return out.str();
}

nlohmann::json inspect_to_json(const InspectReport& r) {
  RunConfig run;
  run.model = r.model;
  const ParameterCounts& p = r.parameters;
  const FlopsPerToken& f = r.flops;
  const MemoryPlan& mem = r.memory;
  nlohmann::json j;
  j["model"] = config_to_json(run)["model"];
  j["context"] = f.context;
  j["batch"] = r.batch;
  j["dtype"] = r.dtype;
  j["parameters"] = {{"embeddings", p.embeddings},
                     {"positions", p.positions},
                     {"attention_per_block", p.attention_per_block},
                     {"norms_per_block", p.norms_per_block},
                     {"ffn_per_block", p.ffn_per_block},
                     {"per_block", p.per_block},
                     {"blocks", p.blocks},
                     {"final_norm", p.final_norm},
                     {"head", p.head},
                     {"total", p.total},
                     {"matmul", p.matmul}};
  j["flops_per_token"] = {{"attention_projections_per_block", f.attention_projections},
                          {"attention_scores_per_block", f.attention_scores},
                          {"attention_scores_causal_per_block", f.attention_scores_causal},
                          {"ffn_per_block", f.ffn},
                          {"head", f.head},
                          {"forward", f.forward},
                          {"forward_causal", f.forward_causal},
                          {"training", f.training},
                          {"training_causal", f.training_causal}};
  j["memory_bytes"] = {{"bytes_per_element", mem.bytes_per_element},
                       {"parameters", mem.parameters},
                       {"gradients", mem.gradients},
                       {"optimizer", mem.optimizer},
                       {"kv_cache", mem.kv_cache},
                       {"training", mem.training},
                       {"activations", mem.activations},
                       {"inference", mem.inference}};
  j["scaling"] = {{"compute_optimal_tokens", r.scaling.compute_optimal_tokens},
                  {"compute_optimal_flops", r.scaling.compute_optimal_flops}};
  return j;
}

}  // namespace causal
