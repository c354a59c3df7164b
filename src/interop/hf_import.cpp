// HF reading: the inverse of hf_export's names (llama: rotate-halves q/k rows, so causal "halves";
// gpt2: Conv1D weights transposed back, c_attn split into q, k and v).
#include "interop/hf_import.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "core/errors.h"
#include "interop/model_from_provenance.h"
#include "interop/qk_layout.h"
#include "interop/vocab.h"
#include "io/safetensors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_hf_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), "", "missing: an HF model folder needs it");
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded() || !json.is_object()) throw ConfigError(path.string(), "", "not a JSON object");
  return json;
}

std::map<std::string, at::Tensor> read_weights(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::exists(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
  } else if (fs::exists(dir / "model.safetensors.index.json")) {
    const nlohmann::json index = read_hf_json(dir / "model.safetensors.index.json");
    std::set<std::string> shards;
    for (const auto& [name, file] : index.at("weight_map").items()) shards.insert(file.get<std::string>());
    for (const std::string& shard : shards) files.push_back(dir / shard);
  } else {
    throw ConfigError((dir / "model.safetensors").string(), "",
                      "missing (nor model.safetensors.index.json): causal imports safetensors weights only");
  }
  std::map<std::string, at::Tensor> weights;
  for (const fs::path& file : files) {
    for (auto& [name, t] : io_as<DataError>([&] { return load_safetensors(file.string()); })) {
      if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kHalf && t.scalar_type() != at::kBFloat16)
        throw ConfigError(file.string(), name,
                          std::string("dtype ") + c10::toString(t.scalar_type()) +
                              ": causal imports only float32, float16 and bfloat16 weights");
      weights[name] = t.to(at::kFloat);
    }
  }
  return weights;
}

class Fields {
 public:
  Fields(const nlohmann::json& json, std::string path) : json_(json), path_(std::move(path)) {}
  const nlohmann::json& at(const std::string& key) const {
    if (!json_.contains(key) || json_.at(key).is_null())
      throw ConfigError(path_, key, "missing: causal needs this key to rebuild the model");
    return json_.at(key);
  }
  int64_t integer(const std::string& key) const {
    if (!at(key).is_number_integer()) throw ConfigError(path_, key, "expected an integer");
    return at(key).get<int64_t>();
  }
  double real(const std::string& key) const {
    if (!at(key).is_number()) throw ConfigError(path_, key, "expected a number");
    return at(key).get<double>();
  }
  template <class T>
  T value(const std::string& key, T fallback) const {
    return json_.contains(key) && !json_.at(key).is_null() ? json_.at(key).get<T>() : fallback;
  }
  void expect(const std::string& key, const nlohmann::json& wanted, const nlohmann::json& fallback,
              const std::string& why) const {
    const nlohmann::json got = json_.contains(key) && !json_.at(key).is_null() ? json_.at(key) : fallback;
    if (got != wanted) throw ConfigError(path_, key, got.dump() + ": " + why);
  }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

}  // namespace

InteropModel import_hf(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const fs::path config_path = dir / "config.json";
  const nlohmann::json config = read_hf_json(config_path);
  const Fields f(config, config_path.string());
  const std::string type = f.value<std::string>("model_type", "");
  if (type != "llama" && type != "gpt2")
    throw ConfigError(
        config_path.string(), "model_type",
        "\"" + type + "\": causal imports only \"llama\" (LlamaForCausalLM) and \"gpt2\" (GPT2LMHeadModel)");
  const bool llama = type == "llama";
  ModelConfig m;
  if (llama) {
    m.d_model = f.integer("hidden_size");
    m.n_layers = f.integer("num_hidden_layers");
    m.n_heads = f.integer("num_attention_heads");
    m.n_kv_heads = f.value<int64_t>("num_key_value_heads", m.n_heads);
    m.ffn_hidden = f.integer("intermediate_size");
    m.max_seq_len = f.integer("max_position_embeddings");
    m.output_vocab = f.integer("vocab_size");
    m.norm = NormKind::kRmsNorm;
    m.norm_eps = f.real("rms_norm_eps");
    m.ffn = FfnKind::kSwiglu;
    m.position = PositionKind::kRope;
    m.rope.theta = f.value<double>("rope_theta", 10000.0);
    m.rope.pairing = RopePairing::kHalves;  // transformers' rotate_half
    m.bias = false;
    m.tie_embeddings = f.value<bool>("tie_word_embeddings", false);
    f.expect("hidden_act", "silu", "silu", "causal's swiglu uses silu");
    f.expect("attention_bias", false, false, "causal's llama-shaped models have no biases");
    f.expect("mlp_bias", false, false, "causal's llama-shaped models have no biases");
    if (config.contains("head_dim") && !config.at("head_dim").is_null())
      f.expect("head_dim", m.d_model / m.n_heads, m.d_model / m.n_heads,
               "causal's head dim is hidden_size / heads");
    if (config.contains("rope_scaling") && !config.at("rope_scaling").is_null()) {
      const nlohmann::json& s = config.at("rope_scaling");
      const std::string kind = s.value("rope_type", s.value("type", std::string()));
      if (kind != "linear")
        throw ConfigError(config_path.string(), "rope_scaling",
                          s.dump() + ": causal imports none and linear");
      m.rope.scaling = RopeScaling::kLinear;
      m.rope.factor = s.at("factor").get<double>();
    }
  } else {
    m.d_model = f.integer("n_embd");
    m.n_layers = f.integer("n_layer");
    m.n_heads = f.integer("n_head");
    m.n_kv_heads = m.n_heads;
    m.ffn_hidden = f.value<int64_t>("n_inner", 4 * m.d_model);
    m.max_seq_len = f.integer("n_positions");
    m.output_vocab = f.integer("vocab_size");
    m.norm = NormKind::kLayerNorm;
    m.norm_eps = f.real("layer_norm_epsilon");
    m.ffn = FfnKind::kGelu;
    m.position = PositionKind::kLearned;
    m.bias = true;
    m.tie_embeddings = f.value<bool>("tie_word_embeddings", true);
    f.expect("activation_function", "gelu", "gelu_new",
             "causal's GELU is the exact (erf) one, transformers' \"gelu\"; the tanh approximations differ");
    f.expect("scale_attn_weights", true, true, "causal scales scores by 1/sqrt(head dim)");
    f.expect("scale_attn_by_inverse_layer_idx", false, false, "causal does not scale scores by layer");
  }
  m.inputs = {InputField{"token", m.output_vocab}};
  bool restored = false;
  InteropModel out;
  out.model = model_from_provenance(m, config.value("causal_config", nlohmann::json()), &restored);
  if (restored) out.config = config.at("causal_config");
  const ModelConfig& r = out.model;

  std::map<std::string, at::Tensor> hf = read_weights(dir);
  // GPT2Model (no head) saves without the "transformer." prefix; GPT2LMHeadModel with it.
  auto take = [&](const std::string& name, std::vector<int64_t> shape) {
    auto it = hf.find(name);
    if (it == hf.end() && name.rfind("transformer.", 0) == 0) it = hf.find(name.substr(12));
    if (it == hf.end()) throw ConfigError(dir_name, name, "missing tensor");
    if (it->second.sizes().vec() != shape)
      throw ConfigError(dir_name, name,
                        "shape " + c10::str(it->second.sizes()) + ", expected " + c10::str(shape));
    return it->second;
  };
  auto& w = out.tensors;
  const int64_t d = r.d_model, dk = d / r.n_heads, kv = r.n_kv_heads * dk, h = r.ffn_hidden,
                v = r.output_vocab;
  const std::string embed = "embed." + r.inputs[0].name + ".weight";
  auto bias = [&](const std::string& causal_name, const at::Tensor& t) {
    if (r.bias) {
      w[causal_name] = t;
    } else if (t.ne(0).any().item<bool>()) {
      throw ConfigError(dir_name, causal_name,
                        "non-zero bias in a model whose causal config has model.bias false");
    }
  };
  if (llama) {
    const bool interleaved = r.rope.pairing == RopePairing::kInterleaved;
    w[embed] = take("model.embed_tokens.weight", {v, d});
    for (int64_t i = 0; i < r.n_layers; ++i) {
      const std::string b = "blocks." + std::to_string(i) + ".",
                        p = "model.layers." + std::to_string(i) + ".";
      at::Tensor q = take(p + "self_attn.q_proj.weight", {d, d}),
                 k = take(p + "self_attn.k_proj.weight", {kv, d});
      if (interleaved) {
        q = halves_to_interleaved(q, r.n_heads);
        k = halves_to_interleaved(k, r.n_kv_heads);
      }
      w[b + "attn_norm.weight"] = take(p + "input_layernorm.weight", {d});
      w[b + "attn.q_proj.weight"] = q;
      w[b + "attn.k_proj.weight"] = k;
      w[b + "attn.v_proj.weight"] = take(p + "self_attn.v_proj.weight", {kv, d});
      w[b + "attn.o_proj.weight"] = take(p + "self_attn.o_proj.weight", {d, d});
      w[b + "ffn_norm.weight"] = take(p + "post_attention_layernorm.weight", {d});
      w[b + "ffn.gate_proj.weight"] = take(p + "mlp.gate_proj.weight", {h, d});
      w[b + "ffn.up_proj.weight"] = take(p + "mlp.up_proj.weight", {h, d});
      w[b + "ffn.down_proj.weight"] = take(p + "mlp.down_proj.weight", {d, h});
    }
    w["final_norm.weight"] = take("model.norm.weight", {d});
  } else {
    w[embed] = take("transformer.wte.weight", {v, d});
    w["pos_embed.weight"] = take("transformer.wpe.weight", {r.max_seq_len, d});
    for (int64_t i = 0; i < r.n_layers; ++i) {
      const std::string b = "blocks." + std::to_string(i) + ".",
                        p = "transformer.h." + std::to_string(i) + ".";
      w[b + "attn_norm.weight"] = take(p + "ln_1.weight", {d});
      bias(b + "attn_norm.bias", take(p + "ln_1.bias", {d}));
      const at::Tensor qkv = take(p + "attn.c_attn.weight", {d, 3 * d}).t();  // Conv1D: (in, out)
      const at::Tensor qkv_bias = take(p + "attn.c_attn.bias", {3 * d});
      const char* names[] = {"q_proj", "k_proj", "v_proj"};
      for (int64_t part = 0; part < 3; ++part) {
        w[b + "attn." + names[part] + ".weight"] = qkv.narrow(0, part * d, d).contiguous();
        bias(b + "attn." + names[part] + ".bias", qkv_bias.narrow(0, part * d, d).contiguous());
      }
      w[b + "attn.o_proj.weight"] = take(p + "attn.c_proj.weight", {d, d}).t().contiguous();
      bias(b + "attn.o_proj.bias", take(p + "attn.c_proj.bias", {d}));
      w[b + "ffn_norm.weight"] = take(p + "ln_2.weight", {d});
      bias(b + "ffn_norm.bias", take(p + "ln_2.bias", {d}));
      w[b + "ffn.fc_in.weight"] = take(p + "mlp.c_fc.weight", {d, h}).t().contiguous();
      bias(b + "ffn.fc_in.bias", take(p + "mlp.c_fc.bias", {h}));
      w[b + "ffn.fc_out.weight"] = take(p + "mlp.c_proj.weight", {h, d}).t().contiguous();
      bias(b + "ffn.fc_out.bias", take(p + "mlp.c_proj.bias", {d}));
    }
    w["final_norm.weight"] = take("transformer.ln_f.weight", {d});
    bias("final_norm.bias", take("transformer.ln_f.bias", {d}));
  }
  if (!r.tie_embeddings) w["head.weight"] = take("lm_head.weight", {v, d});
  if (fs::exists(dir / "tokenizer.model")) {
    std::ifstream in(dir / "tokenizer.model", std::ios::binary);
    out.vocab_pieces = parse_sentencepiece(std::string((std::istreambuf_iterator<char>(in)),
                                                       std::istreambuf_iterator<char>()))
                           .pieces;
  }
  return out;
}

}  // namespace causal
