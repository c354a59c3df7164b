// HF reading: the inverse of hf_export's config.json.
#include "interop/hf_model_config.h"

#include <set>

#include "core/errors.h"

namespace causal {
namespace {

class Fields {
 public:
  Fields(const nlohmann::json& object, std::string path, std::string prefix = "")
      : json_(object), path_(std::move(path)), prefix_(std::move(prefix)) {}
  bool has(const std::string& key) const { return json_.contains(key) && !json_.at(key).is_null(); }
  const std::string& path() const { return path_; }
  const nlohmann::json& at(const std::string& key) const {
    if (!has(key))
      throw ConfigError(path_, prefix_ + key, "missing: causal needs this key to rebuild the model");
    return json_.at(key);
  }
  int64_t integer(const std::string& key) const {
    if (!at(key).is_number_integer()) throw ConfigError(path_, prefix_ + key, "expected an integer");
    if (at(key).is_number_unsigned() && at(key).get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw ConfigError(path_, prefix_ + key, "above 2^63 - 1");
    return at(key).get<int64_t>();
  }
  double real(const std::string& key) const {
    if (!at(key).is_number()) throw ConfigError(path_, prefix_ + key, "expected a number");
    return at(key).get<double>();
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  double real_or(const std::string& key, double fallback) const { return has(key) ? real(key) : fallback; }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_boolean()) throw ConfigError(path_, prefix_ + key, "expected true or false");
    return at(key).get<bool>();
  }
  std::string text_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_string()) throw ConfigError(path_, prefix_ + key, "expected a string");
    return at(key).get<std::string>();
  }
  // The key's value (or `fallback` when absent) must be `wanted`.
  void expect(const std::string& key, const nlohmann::json& wanted, const nlohmann::json& fallback,
              const std::string& why) const {
    const nlohmann::json got = has(key) ? json_.at(key) : fallback;
    if (got != wanted)
      throw ConfigError(path_, prefix_ + key,
                        got.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ": " + why);
  }

 private:
  const nlohmann::json& json_;
  std::string path_, prefix_;  // prefix_: the object's own key, for errors about its fields
};

// llama's layout; qwen2 adds biases on q, k and v (always: Qwen2Config has no switch for them).
ModelConfig llama_model(const Fields& f, const nlohmann::json& config, const std::string& path, bool qwen2) {
  ModelConfig m;
  m.d_model = f.integer("hidden_size");
  m.n_layers = f.integer("num_hidden_layers");
  m.n_heads = f.integer("num_attention_heads");
  m.n_kv_heads = f.integer_or("num_key_value_heads", m.n_heads);
  m.ffn_hidden = f.integer("intermediate_size");
  m.max_seq_len = f.integer("max_position_embeddings");
  m.output_vocab = f.integer("vocab_size");
  m.norm = NormKind::kRmsNorm;
  m.norm_eps = f.real("rms_norm_eps");
  m.ffn = FfnKind::kSwiglu;
  m.position = PositionKind::kRope;
  m.rope.theta = f.real_or("rope_theta", 10000.0);
  m.rope.pairing = RopePairing::kHalves;  // transformers' rotate_half
  m.bias = false;
  m.qkv_bias = qwen2;
  m.tie_embeddings = f.boolean_or("tie_word_embeddings", false);
  f.expect("hidden_act", "silu", "silu", "causal's swiglu uses silu");
  if (qwen2) {
    f.expect("use_sliding_window", false, false,
             "causal attends over every earlier position; qwen2's sliding window is not imported");
    if (f.has("layer_types")) {
      const nlohmann::json& types = config.at("layer_types");
      if (!types.is_array()) throw ConfigError(path, "layer_types", "expected an array");
      for (const nlohmann::json& type : types)
        if (type != "full_attention")
          throw ConfigError(path, "layer_types",
                            type.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                ": causal imports only \"full_attention\" layers");
    }
  } else {
    f.expect("attention_bias", false, false, "causal's llama-shaped models have no biases");
    f.expect("mlp_bias", false, false, "causal's llama-shaped models have no biases");
  }
  if (f.has("rope_scaling")) {
    const nlohmann::json& s = config.at("rope_scaling");
    if (!s.is_object()) throw ConfigError(path, "rope_scaling", "expected an object or null");
    const Fields scaling(s, path, "rope_scaling.");
    const std::string kind = scaling.text_or("rope_type", scaling.text_or("type", ""));
    if (kind != "linear")
      throw ConfigError(path, "rope_scaling",
                        s.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                            ": causal imports none and linear");
    m.rope.scaling = RopeScaling::kLinear;
    m.rope.factor = scaling.real("factor");
  }
  return m;
}

ModelConfig gpt2_model(const Fields& f) {
  ModelConfig m;
  m.d_model = f.integer("n_embd");
  m.n_layers = f.integer("n_layer");
  m.n_heads = f.integer("n_head");
  m.n_kv_heads = m.n_heads;
  m.ffn_hidden = f.integer_or("n_inner", 0);  // 0: 4 x n_embd, filled in once n_embd is validated
  m.max_seq_len = f.integer("n_positions");
  m.output_vocab = f.integer("vocab_size");
  m.norm = NormKind::kLayerNorm;
  m.norm_eps = f.real("layer_norm_epsilon");
  m.position = PositionKind::kLearned;
  m.bias = true;
  m.tie_embeddings = f.boolean_or("tie_word_embeddings", true);
  // transformers' "gelu" is the exact (erf) GELU; "gelu_new" (GPT2Config's default) and "gelu_pytorch_tanh"
  // are both the tanh approximation, causal's "gelu_tanh".
  const std::string activation = f.text_or("activation_function", "gelu_new");
  if (activation == "gelu") {
    m.ffn = FfnKind::kGelu;
  } else if (activation == "gelu_new" || activation == "gelu_pytorch_tanh") {
    m.ffn = FfnKind::kGeluTanh;
  } else {
    throw ConfigError(
        f.path(), "activation_function",
        "\"" + activation +
            "\": causal imports \"gelu\" (exact) and \"gelu_new\" or \"gelu_pytorch_tanh\" (tanh)");
  }
  f.expect("scale_attn_weights", true, true, "causal scales scores by 1/sqrt(head dim)");
  f.expect("scale_attn_by_inverse_layer_idx", false, false, "causal does not scale scores by layer");
  return m;
}

}  // namespace

ImportedConfig hf_model_config(const nlohmann::json& config, const std::string& path) {
  if (!config.is_object()) throw ConfigError(path, "", "not a JSON object");
  const Fields f(config, path);
  const std::string type = f.text_or("model_type", "");
  if (type != "llama" && type != "qwen2" && type != "gpt2")
    throw ConfigError(
        path, "model_type",
        "\"" + type +
            "\": causal imports only \"llama\" (LlamaForCausalLM), \"qwen2\" (Qwen2ForCausalLM) "
            "and \"gpt2\" (GPT2LMHeadModel)");
  const bool llama = type != "gpt2";
  ModelConfig m = llama ? llama_model(f, config, path, type == "qwen2") : gpt2_model(f);
  m.inputs = {InputField{"token", m.output_vocab}};
  if (!llama && m.ffn_hidden == 0 && m.d_model > 0 && m.d_model < (int64_t{1} << 59))
    m.ffn_hidden = 4 * m.d_model;
  const TargetArchitecture arch = type == "llama"   ? TargetArchitecture::kLlama
                                  : type == "qwen2" ? TargetArchitecture::kQwen2
                                                    : TargetArchitecture::kGpt2;
  ImportedConfig out =
      imported_config(arch, m, f.has("causal_config") ? config.at("causal_config") : nlohmann::json(), path);
  // Checked once the sizes are valid (n_heads > 0 and divides hidden_size).
  if (llama && f.has("head_dim"))
    f.expect("head_dim", m.head_dim(), m.head_dim(), "causal's head dim is hidden_size / heads");
  return out;
}

std::vector<std::string> hf_shard_files(const nlohmann::json& index, const std::string& path) {
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    throw ConfigError(path, "weight_map", "missing: expected an object from tensor name to shard file");
  std::set<std::string> shards;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    if (!file.is_string()) throw ConfigError(path, "weight_map." + name, "expected a file name");
    const std::string shard = file.get<std::string>();
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
        shard.find('\0') != std::string::npos)
      throw ConfigError(path, "weight_map." + name,
                        "\"" + shard + "\": expected a file name inside the model folder");
    shards.insert(shard);
  }
  return {shards.begin(), shards.end()};
}

}  // namespace causal
