// HF layout writing: config.json, the tokenizer files and the weights under transformers' names
// (interop/tensor_map.h: Llama's and Qwen2's rotate-halves q/k rows, GPT-2's transposed Conv1D weights and
// fused c_attn).
#include "interop/hf_export.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/errors.h"
#include "data/byte_bpe_model.h"
#include "interop/export_source.h"
#include "interop/mapped_tensors.h"
#include "interop/tensor_bytes.h"
#include "interop/vocab.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

std::string torch_dtype_name(GgufTensorType dtype) {
  return dtype == GgufTensorType::kF16 ? "float16" : dtype == GgufTensorType::kBf16 ? "bfloat16" : "float32";
}

nlohmann::json special_ids(const InteropModel& model) {
  nlohmann::json ids = nlohmann::json::object();
  if (model.tokenizer) {
    ids["bos_token_id"] = model.tokenizer->info.bos_id;
    ids["eos_token_id"] = model.tokenizer->info.eos_id;
    ids["pad_token_id"] = model.tokenizer->info.pad_id;
  }
  return ids;
}

nlohmann::json llama_config(const InteropModel& model, GgufTensorType dtype) {
  const ModelConfig& m = model.model;
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"vocab_size", m.output_vocab},
                      {"hidden_size", m.d_model},
                      {"intermediate_size", m.ffn_hidden},
                      {"num_hidden_layers", m.n_layers},
                      {"num_attention_heads", m.n_heads},
                      {"num_key_value_heads", m.n_kv_heads},
                      {"head_dim", m.head_dim()},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", m.max_seq_len},
                      {"rms_norm_eps", m.norm_eps},
                      {"rope_theta", m.rope.theta},
                      {"rope_scaling", nullptr},
                      {"tie_word_embeddings", m.tie_embeddings},
                      {"attention_bias", false},
                      {"mlp_bias", false},
                      {"attention_dropout", 0.0},
                      {"initializer_range", m.init_std},
                      {"torch_dtype", torch_dtype_name(dtype)}};
  if (m.rope.scaling == RopeScaling::kLinear)
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", m.rope.factor}};
  c.update(special_ids(model));
  return c;
}

// Qwen2Config: llama's keys without attention_bias and mlp_bias (q, k and v always have biases, nothing
// else does) and with its sliding window off on every layer.
nlohmann::json qwen2_config(const InteropModel& model, GgufTensorType dtype) {
  nlohmann::json c = llama_config(model, dtype);
  c.erase("attention_bias");
  c.erase("mlp_bias");
  c.erase("head_dim");
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  c["use_sliding_window"] = false;
  c["sliding_window"] = nullptr;
  c["max_window_layers"] = model.model.n_layers;
  c["layer_types"] = std::vector<std::string>(static_cast<size_t>(model.model.n_layers), "full_attention");
  return c;
}

nlohmann::json gpt2_config(const InteropModel& model, GgufTensorType dtype) {
  const ModelConfig& m = model.model;
  nlohmann::json c = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", m.output_vocab},
      {"n_positions", m.max_seq_len},
      {"n_embd", m.d_model},
      {"n_layer", m.n_layers},
      {"n_head", m.n_heads},
      {"n_inner", m.ffn_hidden},
      // transformers' "gelu" is the exact (erf) GELU; its "gelu_pytorch_tanh" the tanh one through the same
      // ATen kernel as causal's "gelu_tanh" ("gelu_new", the same formula, runs as separate operations).
      {"activation_function", m.ffn == FfnKind::kGeluTanh ? "gelu_pytorch_tanh" : "gelu"},
      {"layer_norm_epsilon", m.norm_eps},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", m.tie_embeddings},
      {"initializer_range", m.init_std},
      {"torch_dtype", torch_dtype_name(dtype)}};
  c.update(special_ids(model));
  return c;
}

// tokenizer.json for the bytes tokenizer: a byte-level BPE without merges, so every byte is one token.
nlohmann::json byte_level_tokenizer(const Vocab& vocab) {
  nlohmann::json ids = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    ids[vocab.pieces[i]] = i;
    if (vocab.kinds[i] == PieceKind::kControl)
      added.push_back({{"id", i},
                       {"content", vocab.pieces[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
  }
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const std::string bos = vocab.pieces[static_cast<size_t>(vocab.bos_id)];
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {vocab.bos_id}}, {"tokens", {bos}}}}}}}},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", ids},
        {"merges", nlohmann::json::array()}}}};
}

// The run's vocab, when it has one to write (ids from another trainer have none). Read before any weight is
// written, so a tokenizer that cannot be exported stops the export early.
std::optional<Vocab> exported_vocab(const InteropModel& model) {
  if (!model.tokenizer || model.tokenizer->info.name == kImportedTokenizer) return std::nullopt;
  return vocab_of(model.tokenizer->info, model.tokenizer->model_bytes);
}

void write_tokenizer(const fs::path& dir, const InteropModel& model, const std::optional<Vocab>& exported) {
  if (!exported) return;
  const Vocab& vocab = *exported;
  if (vocab.kind == Vocab::Kind::kByteBpe) {
    // The tokenizer's own files, as HF tokenizers reads them (its pre-tokenizer regexes, added tokens,
    // BOS/EOS and chat template).
    const ByteBpeModel bpe = parse_byte_bpe_model(model.tokenizer->model_bytes, "the run's tokenizer");
    write_file_synced(dir / "tokenizer.json", hf_tokenizer_json(bpe));
    write_file_synced(dir / "tokenizer_config.json", hf_tokenizer_config_json(bpe));
    return;
  }
  auto piece = [&](int64_t id) -> nlohmann::json {
    return id >= 0 ? nlohmann::json(vocab.pieces[static_cast<size_t>(id)]) : nlohmann::json(nullptr);
  };
  nlohmann::json config = {{"bos_token", piece(vocab.bos_id)},
                           {"eos_token", piece(vocab.eos_id)},
                           {"pad_token", piece(vocab.pad_id)},
                           {"add_bos_token", true},
                           {"add_eos_token", false},
                           {"clean_up_tokenization_spaces", false},
                           {"model_max_length", model.model.max_seq_len}};
  if (vocab.kind == Vocab::Kind::kBytes) {
    config["tokenizer_class"] = "PreTrainedTokenizerFast";
    write_file_synced(dir / "tokenizer.json", byte_level_tokenizer(vocab).dump(1) + "\n");
  } else {
    // The SentencePiece model itself, read by transformers' LlamaTokenizer (legacy: SentencePiece's own
    // encoding, with the model's add_dummy_prefix).
    config["tokenizer_class"] = "LlamaTokenizer";
    config["unk_token"] = piece(vocab.unk_id);
    config["legacy"] = true;
    config["add_prefix_space"] = nullptr;
    config["sp_model_kwargs"] = nlohmann::json::object();
    write_file_synced(dir / "tokenizer.model", model.tokenizer->model_bytes);
  }
  write_file_synced(dir / "tokenizer_config.json", config.dump(2) + "\n");
  nlohmann::json special = {{"bos_token", piece(vocab.bos_id)}, {"eos_token", piece(vocab.eos_id)}};
  if (vocab.pad_id >= 0) special["pad_token"] = piece(vocab.pad_id);
  if (vocab.unk_id >= 0) special["unk_token"] = piece(vocab.unk_id);
  write_file_synced(dir / "special_tokens_map.json", special.dump(2) + "\n");
}

}  // namespace

void export_hf(const InteropModel& model, GgufTensorType dtype, const std::string& out,
               const std::string& source) {
  const TargetArchitecture arch = check_exportable(model.model, "hf", source);
  const std::optional<Vocab> vocab = exported_vocab(model);
  const fs::path target = fs::absolute(out);
  if (fs::exists(target))
    throw UsageError("--out " + out +
                     ": already exists; the HF export writes a new folder (remove it first)");
  NamedTensors tensors = file_tensors(tensor_map(InteropFormat::kHf, arch, model.model), model.model,
                                      file_rope_pairing(InteropFormat::kHf), model.tensors, source);
  for (auto& [name, t] : tensors) t = t.to(scalar_type_of(dtype)).contiguous();
  nlohmann::json config = arch == TargetArchitecture::kLlama   ? llama_config(model, dtype)
                          : arch == TargetArchitecture::kQwen2 ? qwen2_config(model, dtype)
                                                               : gpt2_config(model, dtype);
  config["causal_config"] = model.config;  // provenance: the run config, read back by `causal import`

  write_folder_atomically(target, [&](const fs::path& tmp) {
    save_safetensors((tmp / "model.safetensors").string(), tensors, {{"format", "pt"}});
    write_file_synced(tmp / "config.json", config.dump(2) + "\n");
    nlohmann::json generation = special_ids(model);
    generation["do_sample"] = false;
    write_file_synced(tmp / "generation_config.json", generation.dump(2) + "\n");
    write_tokenizer(tmp, model, vocab);
  });
}

}  // namespace causal
