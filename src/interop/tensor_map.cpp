// The name tables: gguf-py's tensor names and transformers' LlamaForCausalLM / Qwen2ForCausalLM /
// GPT2LMHeadModel state dicts.
#include "interop/tensor_map.h"

namespace causal {
namespace {

// Sizes a row's shape is made of.
enum class Dim { kD, kKv, kFfn, kQkv, kVocabIn, kVocabOut, kContext };

// kQkvBias: a bias of q, k or v (present under model.qkv_bias too); kQueryBias and kKeyBias also have their
// RoPE pairs renumbered as q's and k's rows.
enum class Role { kPlain, kQuery, kKey, kBias, kQkvBias, kQueryBias, kKeyBias };

struct Row {
  const char* causal;
  const char* gguf;
  const char* hf;
  std::vector<Dim> shape;  // causal's (out, in) orientation
  Role role = Role::kPlain;
  bool conv1d = false;  // stored transposed in the HF layout
  int64_t part = 0, parts = 1;
};

using D = Dim;

// Per block ("blocks.N." / "blk.N." / "model.layers.N.").
const std::vector<Row> kLlamaBlock = {
    {"attn_norm.weight", "attn_norm.weight", "input_layernorm.weight", {D::kD}},
    {"attn.q_proj.weight", "attn_q.weight", "self_attn.q_proj.weight", {D::kD, D::kD}, Role::kQuery},
    {"attn.k_proj.weight", "attn_k.weight", "self_attn.k_proj.weight", {D::kKv, D::kD}, Role::kKey},
    {"attn.v_proj.weight", "attn_v.weight", "self_attn.v_proj.weight", {D::kKv, D::kD}},
    {"attn.o_proj.weight", "attn_output.weight", "self_attn.o_proj.weight", {D::kD, D::kD}},
    {"ffn_norm.weight", "ffn_norm.weight", "post_attention_layernorm.weight", {D::kD}},
    {"ffn.gate_proj.weight", "ffn_gate.weight", "mlp.gate_proj.weight", {D::kFfn, D::kD}},
    {"ffn.up_proj.weight", "ffn_up.weight", "mlp.up_proj.weight", {D::kFfn, D::kD}},
    {"ffn.down_proj.weight", "ffn_down.weight", "mlp.down_proj.weight", {D::kD, D::kFfn}},
};

// Qwen2: llama's rows with q, k and v biases after their weights (o_proj has none).
const std::vector<Row> kQwen2Block = [] {
  std::vector<Row> rows;
  for (const Row& row : kLlamaBlock) {
    rows.push_back(row);
    const std::string name = row.causal;
    if (name == "attn.q_proj.weight")
      rows.push_back({"attn.q_proj.bias", "attn_q.bias", "self_attn.q_proj.bias", {D::kD}, Role::kQueryBias});
    if (name == "attn.k_proj.weight")
      rows.push_back({"attn.k_proj.bias", "attn_k.bias", "self_attn.k_proj.bias", {D::kKv}, Role::kKeyBias});
    if (name == "attn.v_proj.weight")
      rows.push_back({"attn.v_proj.bias", "attn_v.bias", "self_attn.v_proj.bias", {D::kKv}, Role::kQkvBias});
  }
  return rows;
}();

// Per block ("blocks.N." / "blk.N." / "transformer.h.N.").
const std::vector<Row> kGpt2Block = {
    {"attn_norm.weight", "attn_norm.weight", "ln_1.weight", {D::kD}},
    {"attn_norm.bias", "attn_norm.bias", "ln_1.bias", {D::kD}, Role::kBias},
    {"attn.q_proj.weight",
     "attn_qkv.weight",
     "attn.c_attn.weight",
     {D::kQkv, D::kD},
     Role::kPlain,
     true,
     0,
     3},
    {"attn.k_proj.weight",
     "attn_qkv.weight",
     "attn.c_attn.weight",
     {D::kQkv, D::kD},
     Role::kPlain,
     true,
     1,
     3},
    {"attn.v_proj.weight",
     "attn_qkv.weight",
     "attn.c_attn.weight",
     {D::kQkv, D::kD},
     Role::kPlain,
     true,
     2,
     3},
    {"attn.q_proj.bias", "attn_qkv.bias", "attn.c_attn.bias", {D::kQkv}, Role::kQkvBias, false, 0, 3},
    {"attn.k_proj.bias", "attn_qkv.bias", "attn.c_attn.bias", {D::kQkv}, Role::kQkvBias, false, 1, 3},
    {"attn.v_proj.bias", "attn_qkv.bias", "attn.c_attn.bias", {D::kQkv}, Role::kQkvBias, false, 2, 3},
    {"attn.o_proj.weight", "attn_output.weight", "attn.c_proj.weight", {D::kD, D::kD}, Role::kPlain, true},
    {"attn.o_proj.bias", "attn_output.bias", "attn.c_proj.bias", {D::kD}, Role::kBias},
    {"ffn_norm.weight", "ffn_norm.weight", "ln_2.weight", {D::kD}},
    {"ffn_norm.bias", "ffn_norm.bias", "ln_2.bias", {D::kD}, Role::kBias},
    {"ffn.fc_in.weight", "ffn_up.weight", "mlp.c_fc.weight", {D::kFfn, D::kD}, Role::kPlain, true},
    {"ffn.fc_in.bias", "ffn_up.bias", "mlp.c_fc.bias", {D::kFfn}, Role::kBias},
    {"ffn.fc_out.weight", "ffn_down.weight", "mlp.c_proj.weight", {D::kD, D::kFfn}, Role::kPlain, true},
    {"ffn.fc_out.bias", "ffn_down.bias", "mlp.c_proj.bias", {D::kD}, Role::kBias},
};

}  // namespace

RopePairing file_rope_pairing(InteropFormat format) {
  return format == InteropFormat::kGguf ? RopePairing::kInterleaved : RopePairing::kHalves;
}

std::vector<MappedTensor> tensor_map(InteropFormat format, TargetArchitecture arch, const ModelConfig& m) {
  const bool gguf = format == InteropFormat::kGguf, llama = arch != TargetArchitecture::kGpt2;
  // llama.cpp runs qwen2 with its NEOX rope: the q/k rows stay in transformers' rotate-half order.
  const std::optional<RopePairing> pairing = gguf && arch == TargetArchitecture::kQwen2
                                                 ? std::optional<RopePairing>(RopePairing::kHalves)
                                                 : std::nullopt;
  auto size = [&](Dim dim) -> int64_t {
    switch (dim) {
      case Dim::kD:
        return m.d_model;
      case Dim::kKv:
        return m.n_kv_heads * m.head_dim();
      case Dim::kFfn:
        return m.ffn_hidden;
      case Dim::kQkv:
        return 3 * m.d_model;
      case Dim::kVocabIn:
        return m.inputs[0].vocab;
      case Dim::kVocabOut:
        return m.output_vocab;
      case Dim::kContext:
        return m.max_seq_len;
    }
    return 0;
  };
  std::vector<MappedTensor> out;
  auto add = [&](const Row& row, const std::string& causal_prefix, const std::string& file_prefix) {
    MappedTensor t;
    t.causal = causal_prefix + row.causal;
    t.file = file_prefix + (gguf ? row.gguf : row.hf);
    for (Dim dim : row.shape) t.file_shape.push_back(size(dim));
    t.transposed = !gguf && row.conv1d;
    if (t.transposed) std::swap(t.file_shape[0], t.file_shape[1]);
    t.part = row.part;
    t.parts = row.parts;
    const bool query = row.role == Role::kQuery || row.role == Role::kQueryBias;
    const bool key = row.role == Role::kKey || row.role == Role::kKeyBias;
    t.rotary_heads = query ? m.n_heads : key ? m.n_kv_heads : 0;
    if (t.rotary_heads > 0) t.file_pairing = pairing;
    const bool qkv_bias =
        row.role == Role::kQkvBias || row.role == Role::kQueryBias || row.role == Role::kKeyBias;
    t.absent = (row.role == Role::kBias || qkv_bias) && !m.bias && !(qkv_bias && m.qkv_bias);
    out.push_back(std::move(t));
  };
  const std::string embed = "embed." + m.inputs[0].name + ".weight";
  if (llama) {
    add({"", "token_embd.weight", "model.embed_tokens.weight", {D::kVocabIn, D::kD}}, embed, "");
  } else {
    add({"", "token_embd.weight", "transformer.wte.weight", {D::kVocabIn, D::kD}}, embed, "");
    add({"pos_embed.weight", "position_embd.weight", "transformer.wpe.weight", {D::kContext, D::kD}}, "", "");
  }
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string n = std::to_string(i) + ".";
    const std::string file = gguf ? "blk." + n : llama ? "model.layers." + n : "transformer.h." + n;
    const std::vector<Row>& block = arch == TargetArchitecture::kLlama   ? kLlamaBlock
                                    : arch == TargetArchitecture::kQwen2 ? kQwen2Block
                                                                         : kGpt2Block;
    for (const Row& row : block) add(row, "blocks." + n, file);
  }
  if (llama) {
    add({"final_norm.weight", "output_norm.weight", "model.norm.weight", {D::kD}}, "", "");
  } else {
    add({"final_norm.weight", "output_norm.weight", "transformer.ln_f.weight", {D::kD}}, "", "");
    add({"final_norm.bias", "output_norm.bias", "transformer.ln_f.bias", {D::kD}, Role::kBias}, "", "");
  }
  if (!m.tie_embeddings)
    add({"head.weight", "output.weight", "lm_head.weight", {D::kVocabOut, D::kD}}, "", "");
  return out;
}

std::string architecture_name(TargetArchitecture arch) {
  return arch == TargetArchitecture::kLlama ? "llama" : arch == TargetArchitecture::kQwen2 ? "qwen2" : "gpt2";
}

std::string module_of_weight(const std::string& weight) {
  return weight.substr(0, weight.size() - std::string(".weight").size());
}

}  // namespace causal
