// GGUF reading: the inverse of gguf_export's key and tensor names.
#include "interop/gguf_import.h"

#include <ATen/ATen.h>

#include "core/errors.h"
#include "interop/model_from_provenance.h"
#include "interop/qk_layout.h"
#include "interop/tensor_bytes.h"

namespace causal {
namespace {

class Keys {
 public:
  Keys(const GgufFile& file, std::string path) : file_(file), path_(std::move(path)) {}
  const GgufValue& at(const std::string& key) const {
    const GgufValue* v = file_.find(key);
    if (!v) throw ConfigError(path_, key, "missing: causal needs this key to rebuild the model");
    return *v;
  }
  int64_t integer(const std::string& key) const {
    const GgufValue& v = at(key);
    if (const auto* i = std::get_if<int64_t>(&v.value)) return *i;
    if (const auto* u = std::get_if<uint64_t>(&v.value)) return static_cast<int64_t>(*u);
    throw ConfigError(path_, key, "expected an integer");
  }
  double real(const std::string& key) const {
    const GgufValue& v = at(key);
    if (const auto* d = std::get_if<double>(&v.value)) return *d;
    throw ConfigError(path_, key, "expected a float");
  }
  std::string text(const std::string& key) const {
    const GgufValue& v = at(key);
    if (const auto* s = std::get_if<std::string>(&v.value)) return *s;
    throw ConfigError(path_, key, "expected a string");
  }
  bool has(const std::string& key) const { return file_.find(key) != nullptr; }

 private:
  const GgufFile& file_;
  std::string path_;
};

}  // namespace

InteropModel model_from_gguf(const GgufFile& file, const std::string& path) {
  const Keys keys(file, path);
  const std::string arch = keys.text("general.architecture");
  if (arch != "llama" && arch != "gpt2")
    throw ConfigError(path, "general.architecture",
                      "\"" + arch + "\": causal imports only \"llama\" and \"gpt2\" models");
  const bool llama = arch == "llama";
  ModelConfig m;
  m.d_model = keys.integer(arch + ".embedding_length");
  m.n_layers = keys.integer(arch + ".block_count");
  m.n_heads = keys.integer(arch + ".attention.head_count");
  m.n_kv_heads = keys.has(arch + ".attention.head_count_kv") ? keys.integer(arch + ".attention.head_count_kv")
                                                             : m.n_heads;
  m.ffn_hidden = keys.integer(arch + ".feed_forward_length");
  m.max_seq_len = keys.integer(arch + ".context_length");
  const GgufTensor* embed = file.tensor("token_embd.weight");
  if (!embed) throw ConfigError(path, "token_embd.weight", "missing tensor");
  m.inputs = {InputField{"token", embed->shape[0]}};
  m.output_vocab = embed->shape[0];
  m.tie_embeddings = file.tensor("output.weight") == nullptr;
  const std::string key_length = arch + ".attention.key_length";
  if (keys.has(key_length) && keys.integer(key_length) * m.n_heads != m.d_model)
    throw ConfigError(path, key_length,
                      std::to_string(keys.integer(key_length)) +
                          ": causal's head dim is embedding_length / head_count (" +
                          std::to_string(m.d_model / m.n_heads) + ")");
  if (llama) {
    m.norm = NormKind::kRmsNorm;
    m.ffn = FfnKind::kSwiglu;
    m.position = PositionKind::kRope;
    m.bias = false;
    m.norm_eps = keys.real("llama.attention.layer_norm_rms_epsilon");
    m.rope.theta = keys.real("llama.rope.freq_base");
    m.rope.pairing = RopePairing::kInterleaved;  // llama.cpp's llama rotates adjacent pairs
    if (keys.has("llama.rope.dimension_count") &&
        keys.integer("llama.rope.dimension_count") != m.d_model / m.n_heads)
      throw ConfigError(path, "llama.rope.dimension_count",
                        std::to_string(keys.integer("llama.rope.dimension_count")) +
                            ": causal rotates the whole head (" + std::to_string(m.d_model / m.n_heads) +
                            ")");
    const std::string scaling =
        keys.has("llama.rope.scaling.type") ? keys.text("llama.rope.scaling.type") : "none";
    if (scaling == "linear") {
      m.rope.scaling = RopeScaling::kLinear;
      m.rope.factor = keys.real("llama.rope.scaling.factor");
    } else if (scaling != "none") {
      throw ConfigError(path, "llama.rope.scaling.type",
                        "\"" + scaling + "\": causal imports none and linear");
    }
  } else {
    m.norm = NormKind::kLayerNorm;
    m.ffn = FfnKind::kGelu;
    m.position = PositionKind::kLearned;
    m.bias = true;
    m.norm_eps = keys.real("gpt2.attention.layer_norm_epsilon");
  }
  const nlohmann::json provenance = keys.has("causal.config")
                                        ? nlohmann::json::parse(keys.text("causal.config"), nullptr, false)
                                        : nlohmann::json();
  bool restored = false;
  InteropModel out;
  out.model = model_from_provenance(m, provenance, &restored);
  if (restored) out.config = provenance;
  const ModelConfig& r = out.model;

  auto get = [&](const std::string& name, std::vector<int64_t> shape) {
    const GgufTensor* t = file.tensor(name);
    if (!t) throw ConfigError(path, name, "missing tensor");
    if (t->shape != shape) {
      std::string want, got;
      for (int64_t d : shape) want += (want.empty() ? "" : ",") + std::to_string(d);
      for (int64_t d : t->shape) got += (got.empty() ? "" : ",") + std::to_string(d);
      throw ConfigError(path, name, "shape (" + got + "), expected (" + want + ") from the hyperparameters");
    }
    return tensor_from_bytes(t->data, t->shape, t->type);
  };
  const int64_t d = r.d_model, dk = r.d_model / r.n_heads, kv = r.n_kv_heads * dk, h = r.ffn_hidden;
  auto& w = out.tensors;
  // A gpt2 file always has biases; a causal model exported without them had zeros written, dropped here.
  auto bias = [&](const std::string& causal_name, const at::Tensor& t) {
    if (r.bias) {
      w[causal_name] = t;
    } else if (t.ne(0).any().item<bool>()) {
      throw ConfigError(path, causal_name,
                        "non-zero bias in a model whose causal config has model.bias false");
    }
  };
  w["embed.token.weight"] = get("token_embd.weight", {r.output_vocab, d});
  if (!llama) w["pos_embed.weight"] = get("position_embd.weight", {r.max_seq_len, d});
  const bool halves = llama && r.rope.pairing == RopePairing::kHalves;
  for (int64_t i = 0; i < r.n_layers; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
    if (llama) {
      at::Tensor q = get(g + "attn_q.weight", {d, d}), k = get(g + "attn_k.weight", {kv, d});
      if (halves) {
        q = interleaved_to_halves(q, r.n_heads);
        k = interleaved_to_halves(k, r.n_kv_heads);
      }
      w[b + "attn_norm.weight"] = get(g + "attn_norm.weight", {d});
      w[b + "attn.q_proj.weight"] = q;
      w[b + "attn.k_proj.weight"] = k;
      w[b + "attn.v_proj.weight"] = get(g + "attn_v.weight", {kv, d});
      w[b + "attn.o_proj.weight"] = get(g + "attn_output.weight", {d, d});
      w[b + "ffn_norm.weight"] = get(g + "ffn_norm.weight", {d});
      w[b + "ffn.gate_proj.weight"] = get(g + "ffn_gate.weight", {h, d});
      w[b + "ffn.up_proj.weight"] = get(g + "ffn_up.weight", {h, d});
      w[b + "ffn.down_proj.weight"] = get(g + "ffn_down.weight", {d, h});
    } else {
      w[b + "attn_norm.weight"] = get(g + "attn_norm.weight", {d});
      bias(b + "attn_norm.bias", get(g + "attn_norm.bias", {d}));
      const at::Tensor qkv = get(g + "attn_qkv.weight", {3 * d, d});
      const at::Tensor qkv_bias = get(g + "attn_qkv.bias", {3 * d});
      const char* names[] = {"q_proj", "k_proj", "v_proj"};
      for (int64_t part = 0; part < 3; ++part) {
        w[b + "attn." + names[part] + ".weight"] = qkv.narrow(0, part * d, d).contiguous();
        bias(b + "attn." + names[part] + ".bias", qkv_bias.narrow(0, part * d, d).contiguous());
      }
      w[b + "attn.o_proj.weight"] = get(g + "attn_output.weight", {d, d});
      bias(b + "attn.o_proj.bias", get(g + "attn_output.bias", {d}));
      w[b + "ffn_norm.weight"] = get(g + "ffn_norm.weight", {d});
      bias(b + "ffn_norm.bias", get(g + "ffn_norm.bias", {d}));
      w[b + "ffn.fc_in.weight"] = get(g + "ffn_up.weight", {h, d});
      bias(b + "ffn.fc_in.bias", get(g + "ffn_up.bias", {h}));
      w[b + "ffn.fc_out.weight"] = get(g + "ffn_down.weight", {d, h});
      bias(b + "ffn.fc_out.bias", get(g + "ffn_down.bias", {d}));
    }
  }
  w["final_norm.weight"] = get("output_norm.weight", {d});
  if (!llama) bias("final_norm.bias", get("output_norm.bias", {d}));
  if (!r.tie_embeddings) w["head.weight"] = get("output.weight", {r.output_vocab, d});
  if (r.inputs[0].name != "token") {
    w["embed." + r.inputs[0].name + ".weight"] = w["embed.token.weight"];
    w.erase("embed.token.weight");
  }
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens")) {
    if (const auto* pieces = std::get_if<std::vector<std::string>>(&tokens->value))
      out.vocab_pieces = *pieces;
  }
  return out;
}

InteropModel import_gguf(const std::string& path) { return model_from_gguf(read_gguf(path), path); }

}  // namespace causal
