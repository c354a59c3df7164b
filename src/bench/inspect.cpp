// `causal inspect`'s report over the cost model (see inspect.h).
#include "bench/inspect.h"

#include <spdlog/fmt/fmt.h>

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

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (value < 0 ? "-" : "") + out;
}

std::string fixed2(double value) { return fmt::format("{:.2f}", value); }

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

ParameterCounts parameter_counts(const ModelConfig& model) {
  return model_cost(resolved(model), 1, 1, 4).parameters;
}

InspectReport inspect_model(const ModelConfig& model, int64_t context, int64_t batch,
                            const std::string& dtype, const LoraConfig& lora) {
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
  check_cost_size(m, t, batch, "--batch", "");
  r.dtype = dtype;
  r.lora = lora;
  static_cast<ModelCost&>(r) = model_cost(m, t, batch, bytes_per_element(dtype), lora);
  return r;
}

int64_t training_bytes(const MemoryPlan& memory) { return memory.training + memory.activations; }

void check_training_memory(const InspectReport& r, int64_t memory_bytes, const std::string& where) {
  const int64_t needed = training_bytes(r.memory);
  if (memory_bytes <= 0 || needed <= memory_bytes) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  auto gib = [&](int64_t bytes) { return fixed2(static_cast<double>(bytes) / kGiB) + " GiB"; };
  std::string lora_hint;
  if (r.lora.rank == 0) {
    LoraConfig lora;
    lora.rank = 16;
    const int64_t adapted = training_bytes(
        model_cost(r.model, r.flops.context, r.batch, bytes_per_element(r.dtype), lora).memory);
    if (adapted <= memory_bytes)
      lora_hint =
          "; or fine-tune LoRA adapters on the frozen weights instead (--set train.lora.rank=16: about " +
          gib(adapted) + ", docs/finetune.md)";
  }
  throw ConfigError(
      "memory", "model.d_model, model.n_layers, train.batch_size",
      "training needs about " + gib(needed) + " (parameters " + gib(r.memory.parameters) + " + gradients " +
          gib(r.memory.gradients) + " + AdamW state " + gib(r.memory.optimizer) + " + activations " +
          gib(r.memory.activations) + " for a micro-batch of " + std::to_string(r.batch) + " x " +
          std::to_string(r.flops.context) + ", estimate of `causal inspect`) but " + where + " has " +
          gib(memory_bytes) + "; reduce model.d_model (" + std::to_string(r.model.d_model) +
          "), model.n_layers (" + std::to_string(r.model.n_layers) + ") or train.batch_size (" +
          std::to_string(r.batch) + ")" + lora_hint);
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
  if (r.lora.rank > 0) {
    std::string targets;
    for (const std::string& t : r.lora.targets) targets += (targets.empty() ? "" : ",") + t;
    row("LoRA adapters (r " + std::to_string(r.lora.rank) + " on " + targets + ")", with_commas(p.adapters));
  }
  row("trainable" + std::string(r.lora.rank > 0 ? " (the adapters; the rest frozen)" : " (all)"),
      with_commas(p.trainable));
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
  row(std::string(r.lora.rank > 0 ? "training, 3 x forward - frozen weight grads ("
                                  : "training, 3 x forward (") +
          human_count(static_cast<double>(f.training), "FLOP") + ")",
      with_commas(f.training), with_commas(f.training_causal));
  out << "\n";

  out << pad_right("memory (" + r.dtype + ", batch " + std::to_string(r.batch) + ", context " +
                       std::to_string(f.context) + ")",
                   kLabel)
      << pad_left("bytes", kNumber) << "\n";
  row("parameters", with_commas(mem.parameters), human_bytes(mem.parameters));
  if (p.held > 0) {
    // A held base: its product weights at train.lora.base_dtype's bytes each, the rest at the dtype's.
    const double each = base_dtype_bytes(r.lora.base_dtype);
    const auto bytes = static_cast<int64_t>(static_cast<double>(p.held) * each);
    row("of which frozen weights in " + to_string(r.lora.base_dtype) + " (" + fmt::format("{:g}", each) +
            " B each)",
        with_commas(bytes), human_bytes(bytes));
  }
  row("gradients (trainable)", with_commas(mem.gradients), human_bytes(mem.gradients));
  row("AdamW moments (2 x fp32, trainable)", with_commas(mem.optimizer), human_bytes(mem.optimizer));
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
                     {"matmul", p.matmul},
                     {"adapters", p.adapters},
                     {"trainable", p.trainable}};
  if (r.lora.rank > 0)
    j["lora"] = {{"rank", r.lora.rank},
                 {"targets", r.lora.targets},
                 {"base_dtype", to_string(r.lora.base_dtype)},
                 {"held", p.held},
                 {"base_dtype_bytes", base_dtype_bytes(r.lora.base_dtype)}};
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
