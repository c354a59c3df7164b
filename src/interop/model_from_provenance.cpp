// Provenance check: the stored causal config is trusted only where the file itself agrees with it.
#include "interop/model_from_provenance.h"

#include "config/config_io.h"
#include "core/errors.h"

namespace causal {
namespace {

// GGUF stores these as float32: equal when they round to the same float.
bool same_f32(double a, double b) { return static_cast<float>(a) == static_cast<float>(b); }

}  // namespace

ModelConfig model_from_provenance(const ModelConfig& f, const nlohmann::json& provenance, bool* restored) {
  *restored = false;
  if (!provenance.is_object() || !provenance.contains("model")) return f;
  RunConfig stored;
  try {
    stored = parse_config_text(nlohmann::json{{"model", provenance.at("model")}}.dump(), "provenance", {},
                               ConfigScope::kModel);
  } catch (const Error&) {
    return f;  // a config this version cannot read: the file's own fields decide
  }
  const ModelConfig& p = stored.model;
  const bool same = p.inputs.size() == 1 && p.inputs[0].vocab == f.inputs[0].vocab &&
                    p.output_vocab == f.output_vocab && p.d_model == f.d_model && p.n_layers == f.n_layers &&
                    p.n_heads == f.n_heads && p.n_kv_heads == f.n_kv_heads && p.ffn == f.ffn &&
                    p.ffn_hidden == f.ffn_hidden && p.norm == f.norm && same_f32(p.norm_eps, f.norm_eps) &&
                    p.position == f.position && p.max_seq_len == f.max_seq_len &&
                    p.tie_embeddings == f.tie_embeddings && same_f32(p.rope.theta, f.rope.theta) &&
                    p.rope.scaling == f.rope.scaling &&
                    (p.rope.scaling == RopeScaling::kNone || same_f32(p.rope.factor, f.rope.factor)) &&
                    // Fewer biases than the file's (then zeros in it), never more.
                    (!p.bias || f.bias) && (!(p.bias || p.qkv_bias) || f.bias || f.qkv_bias);
  if (!same) return f;
  *restored = true;
  return p;
}

ImportedConfig imported_config(TargetArchitecture arch, const ModelConfig& from_file,
                               const nlohmann::json& provenance, const std::string& path) {
  RunConfig check;
  check.model = from_file;
  validate(check, path, ConfigScope::kModel);
  ImportedConfig out;
  out.arch = arch;
  bool restored = false;
  out.model = model_from_provenance(from_file, provenance, &restored);
  if (restored) out.config = provenance;
  return out;
}

}  // namespace causal
