// GGUF reading: the inverse of gguf_export's keys.
#include "interop/gguf_model_config.h"

#include "core/errors.h"
#include "core/shape_text.h"

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
    if (const auto* u = std::get_if<uint64_t>(&v.value)) {
      if (*u > static_cast<uint64_t>(INT64_MAX)) throw ConfigError(path_, key, "above 2^63 - 1");
      return static_cast<int64_t>(*u);
    }
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

ImportedConfig gguf_model_config(const GgufFile& file, const std::string& path) {
  const Keys keys(file, path);
  const std::string arch = keys.text("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "gpt2")
    throw ConfigError(path, "general.architecture",
                      "\"" + arch + "\": causal imports only \"llama\", \"qwen2\" and \"gpt2\" models");
  const bool llama = arch != "gpt2";  // qwen2 is llama's graph with q/k/v biases and the NEOX rope
  const nlohmann::json provenance = keys.has("causal.config")
                                        ? nlohmann::json::parse(keys.text("causal.config"), nullptr, false)
                                        : nlohmann::json();
  ModelConfig m;
  m.d_model = keys.integer(arch + ".embedding_length");
  m.n_layers = keys.integer(arch + ".block_count");
  m.n_heads = keys.integer(arch + ".attention.head_count");
  m.n_kv_heads = keys.has(arch + ".attention.head_count_kv") ? keys.integer(arch + ".attention.head_count_kv")
                                                             : m.n_heads;
  m.ffn_hidden = keys.integer(arch + ".feed_forward_length");
  m.max_seq_len = keys.integer(arch + ".context_length");
  // Each block has its own tensors: a count beyond the file's is refused before anything is built per block.
  if (m.n_layers > static_cast<int64_t>(file.tensors.size()))
    throw ConfigError(path, arch + ".block_count",
                      std::to_string(m.n_layers) + ": the file holds only " +
                          std::to_string(file.tensors.size()) + " tensors");
  const GgufTensor* embed = file.tensor("token_embd.weight");
  if (!embed) throw ConfigError(path, "token_embd.weight", "missing tensor");
  if (embed->shape.size() != 2)
    throw ConfigError(path, "token_embd.weight",
                      "shape " + shape_text(embed->shape) + ", expected [vocab,d_model]");
  m.inputs = {InputField{"token", embed->shape[0]}};
  m.output_vocab = embed->shape[0];
  m.tie_embeddings = file.tensor("output.weight") == nullptr;
  if (llama) {
    m.norm = NormKind::kRmsNorm;
    m.ffn = FfnKind::kSwiglu;
    m.position = PositionKind::kRope;
    m.bias = false;
    m.qkv_bias = arch == "qwen2";
    m.norm_eps = keys.real(arch + ".attention.layer_norm_rms_epsilon");
    m.rope.theta = keys.real(arch + ".rope.freq_base");
    // llama.cpp's llama rotates adjacent pairs, its qwen2 (NEOX rope) the halves.
    m.rope.pairing = arch == "qwen2" ? RopePairing::kHalves : RopePairing::kInterleaved;
    const std::string scaling_key = arch + ".rope.scaling.type";
    const std::string scaling = keys.has(scaling_key) ? keys.text(scaling_key) : "none";
    if (scaling == "linear") {
      m.rope.scaling = RopeScaling::kLinear;
      m.rope.factor = keys.real(arch + ".rope.scaling.factor");
    } else if (scaling != "none") {
      throw ConfigError(path, scaling_key, "\"" + scaling + "\": causal imports none and linear");
    }
  } else {
    m.norm = NormKind::kLayerNorm;
    // llama.cpp's gpt2 graph runs the tanh GELU, and the file does not say which GELU it was trained with:
    // a causal export of an exact-GELU model says so in its provenance.
    const bool exact = provenance.is_object() && provenance.contains("model") &&
                       provenance.at("model").is_object() &&
                       provenance.at("model").value("ffn", nlohmann::json()) == "gelu";
    m.ffn = exact ? FfnKind::kGelu : FfnKind::kGeluTanh;
    m.position = PositionKind::kLearned;
    m.bias = true;
    m.norm_eps = keys.real("gpt2.attention.layer_norm_epsilon");
  }
  const TargetArchitecture target = arch == "llama"   ? TargetArchitecture::kLlama
                                    : arch == "qwen2" ? TargetArchitecture::kQwen2
                                                      : TargetArchitecture::kGpt2;
  ImportedConfig out = imported_config(target, m, provenance, path);
  // Checked once the sizes are valid (n_heads > 0 and divides d_model).
  const std::string key_length = arch + ".attention.key_length";
  if (keys.has(key_length) && keys.integer(key_length) != m.head_dim())
    throw ConfigError(path, key_length,
                      std::to_string(keys.integer(key_length)) +
                          ": causal's head dim is embedding_length / head_count (" +
                          std::to_string(m.head_dim()) + ")");
  const std::string rope_dims = arch + ".rope.dimension_count";
  if (llama && keys.has(rope_dims) && keys.integer(rope_dims) != m.head_dim())
    throw ConfigError(path, rope_dims,
                      std::to_string(keys.integer(rope_dims)) + ": causal rotates the whole head (" +
                          std::to_string(m.head_dim()) + ")");
  return out;
}

const GgufTensor& gguf_tensor_for(const GgufFile& file, const MappedTensor& row, const std::string& path) {
  const GgufTensor* t = file.tensor(row.file);
  if (!t) throw ConfigError(path, row.file, "missing tensor");
  if (t->shape != row.file_shape)
    throw ConfigError(path, row.file,
                      "shape " + shape_text(t->shape) + ", expected " + shape_text(row.file_shape) +
                          " from the hyperparameters");
  return *t;
}

std::vector<std::string> gguf_vocab_pieces(const GgufFile& file) {
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens")) {
    if (const auto* pieces = std::get_if<std::vector<std::string>>(&tokens->value)) return *pieces;
  }
  return {};
}

}  // namespace causal
