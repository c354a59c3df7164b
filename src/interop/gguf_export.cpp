// GGUF writing: llama.cpp's key and tensor names (gguf-py's constants) for the llama, qwen2 and gpt2 graphs.
#include "interop/gguf_export.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>

#include "config/config_io.h"
#include "core/errors.h"
#include "interop/export_source.h"
#include "interop/mapped_tensors.h"
#include "interop/tensor_bytes.h"
#include "interop/vocab.h"

namespace causal {
namespace {

uint32_t file_type(GgufTensorType dtype) {
  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_BF16 32 ("mostly": 1-D tensors stay F32,
  // and under Q8_0 matrices with rows of partial blocks are F16, as llama.cpp's converter writes them).
  switch (dtype) {
    case GgufTensorType::kF32:
      return 0;
    case GgufTensorType::kF16:
      return 1;
    case GgufTensorType::kQ8_0:
      return 7;
    case GgufTensorType::kBf16:
      return 32;
    default:
      throw UsageError("[export] causal does not write GGUF files of " +
                       gguf_type_name(static_cast<uint32_t>(dtype)) + " (f32, f16, bf16 or q8_0)");
  }
}

void add_tokenizer(GgufFile& file, const Vocab& vocab) {
  auto& md = file.metadata;
  const bool bpe = vocab.kind == Vocab::Kind::kByteBpe;
  const bool spm = vocab.kind != Vocab::Kind::kBytes && !bpe;
  md.emplace_back("tokenizer.ggml.model", GgufValue::string(spm ? "llama" : "gpt2"));
  if (bpe && vocab.pre_tokenizer.empty())
    std::cerr << "warning: [export] the tokenizer's pre-tokenizer regexes match no pre-tokenizer llama.cpp "
                 "names: written as \"default\" (GPT-2's), so llama.cpp may split some text differently\n";
  if (!spm)
    md.emplace_back("tokenizer.ggml.pre",
                    GgufValue::string(bpe && !vocab.pre_tokenizer.empty() ? vocab.pre_tokenizer : "default"));
  md.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(vocab.pieces));
  if (spm) {
    std::vector<double> scores(vocab.scores.begin(), vocab.scores.end());
    md.emplace_back("tokenizer.ggml.scores", GgufValue::f32s(scores));
  }
  std::vector<int64_t> types;
  for (PieceKind kind : vocab.kinds) types.push_back(static_cast<int64_t>(kind));
  md.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(types));
  // A byte vocabulary without merges: every byte stays its own token, exactly as causal's bytes tokenizer.
  if (!spm) md.emplace_back("tokenizer.ggml.merges", GgufValue::strings(vocab.merges));
  // llama.cpp assumes BOS 1 / EOS 2 when these are missing: always write them.
  md.emplace_back("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(vocab.bos_id)));
  md.emplace_back("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(vocab.eos_id)));
  if (vocab.pad_id >= 0)
    md.emplace_back("tokenizer.ggml.padding_token_id", GgufValue::u32(static_cast<uint32_t>(vocab.pad_id)));
  if (vocab.unk_id >= 0)
    md.emplace_back("tokenizer.ggml.unknown_token_id", GgufValue::u32(static_cast<uint32_t>(vocab.unk_id)));
  md.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(!bpe || vocab.add_bos));
  md.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));
  if (spm) {
    md.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(vocab.add_space_prefix));
    md.emplace_back("tokenizer.ggml.remove_extra_whitespaces",
                    GgufValue::boolean(vocab.remove_extra_whitespaces));
  }
  if (!vocab.chat_template.empty())
    md.emplace_back("tokenizer.chat_template", GgufValue::string(vocab.chat_template));
}

}  // namespace

GgufFile gguf_from_model(const InteropModel& model, GgufTensorType dtype, const std::string& source) {
  const ModelConfig& m = model.model;
  const TargetArchitecture arch = check_exportable(m, "gguf", source);
  if (!model.tokenizer)
    throw UsageError("[export] " + source +
                     ": the run has no tokenizer (tokenizer.json); GGUF needs its vocab");
  // Ids imported from another trainer have no pieces to list: llama.cpp's vocab type "none" runs on ids.
  const bool no_vocab = model.tokenizer->info.name == kImportedTokenizer;
  if (no_vocab)
    std::cerr
        << "warning: [export] the run's ids come from another trainer (tokenizer \"imported\"): the GGUF "
           "file gets no vocabulary (tokenizer.ggml.model \"none\"); llama.cpp runs it on token ids\n";
  const Vocab vocab = no_vocab ? Vocab{} : vocab_of(model.tokenizer->info, model.tokenizer->model_bytes);
  if (!no_vocab && static_cast<int64_t>(vocab.pieces.size()) != m.output_vocab)
    throw ConfigError(source, "model.output_vocab",
                      std::to_string(m.output_vocab) + ": the tokenizer has " +
                          std::to_string(vocab.pieces.size()) + " pieces; GGUF needs one per model id");
  if (vocab.kind == Vocab::Kind::kSentencePieceUnigram)
    std::cerr << "warning: [export] unigram SentencePiece model: llama.cpp's llama (SPM) tokenizer merges "
                 "pieces by score, which can split some text differently from SentencePiece's unigram "
                 "search; the weights are exact, tokenization may differ\n";

  if (arch == TargetArchitecture::kGpt2 && m.ffn == FfnKind::kGelu)
    std::cerr
        << "warning: [export] llama.cpp's gpt2 graph computes GELU through a float16 table of the tanh "
           "approximation, not causal's exact GELU: its log-probabilities differ from causal's by up to "
           "~1e-3 on trained models (docs/export.md); the HF export is exact\n";
  if (arch == TargetArchitecture::kGpt2 && m.ffn == FfnKind::kGeluTanh)
    std::cerr << "warning: [export] llama.cpp's gpt2 graph computes the tanh GELU through a float16 table: "
                 "its log-probabilities differ from causal's by rounding (docs/export.md); the HF export is "
                 "exact\n";
  GgufFile file;
  auto& md = file.metadata;
  const std::string a = architecture_name(arch);
  const uint32_t head_dim = static_cast<uint32_t>(m.head_dim());
  md.emplace_back("general.architecture", GgufValue::string(a));
  md.emplace_back("general.name", GgufValue::string(model.config.value("name", std::string("causal"))));
  md.emplace_back("general.file_type", GgufValue::u32(file_type(dtype)));
  md.emplace_back(a + ".vocab_size", GgufValue::u32(static_cast<uint32_t>(m.output_vocab)));
  md.emplace_back(a + ".context_length", GgufValue::u32(static_cast<uint32_t>(m.max_seq_len)));
  md.emplace_back(a + ".embedding_length", GgufValue::u32(static_cast<uint32_t>(m.d_model)));
  md.emplace_back(a + ".feed_forward_length", GgufValue::u32(static_cast<uint32_t>(m.ffn_hidden)));
  md.emplace_back(a + ".block_count", GgufValue::u32(static_cast<uint32_t>(m.n_layers)));
  md.emplace_back(a + ".attention.head_count", GgufValue::u32(static_cast<uint32_t>(m.n_heads)));
  md.emplace_back(a + ".attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(m.n_kv_heads)));
  md.emplace_back(a + ".attention.key_length", GgufValue::u32(head_dim));
  md.emplace_back(a + ".attention.value_length", GgufValue::u32(head_dim));
  if (arch != TargetArchitecture::kGpt2) {
    md.emplace_back(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(m.norm_eps)));
    md.emplace_back(a + ".rope.dimension_count", GgufValue::u32(head_dim));
    md.emplace_back(a + ".rope.freq_base", GgufValue::f32(static_cast<float>(m.rope.theta)));
    const bool linear = m.rope.scaling == RopeScaling::kLinear;
    md.emplace_back(a + ".rope.scaling.type", GgufValue::string(linear ? "linear" : "none"));
    md.emplace_back(a + ".rope.scaling.factor",
                    GgufValue::f32(linear ? static_cast<float>(m.rope.factor) : 1.0f));
  } else {
    md.emplace_back(a + ".attention.layer_norm_epsilon", GgufValue::f32(static_cast<float>(m.norm_eps)));
  }
  if (no_vocab) {
    md.emplace_back("tokenizer.ggml.model", GgufValue::string("none"));
  } else {
    add_tokenizer(file, vocab);
  }
  md.emplace_back("causal.config", GgufValue::string(model.config.dump()));

  // 1-D tensors (norms, biases) stay F32 whatever --dtype says: llama.cpp applies them in F32.
  std::vector<MappedTensor> map = tensor_map(InteropFormat::kGguf, arch, m);
  const char* skip = std::getenv(kSkipQkPermutationEnv);
  if (skip && std::string(skip) == "1") {
    for (MappedTensor& row : map) row.rotary_heads = 0;  // the test's wrong layout: q/k rows as causal's
  }
  for (const auto& [name, t] :
       file_tensors(map, m, file_rope_pairing(InteropFormat::kGguf), model.tensors, source)) {
    const GgufTensorType type = gguf_storage_type(t, dtype);
    file.tensors.push_back({name, t.sizes().vec(), type, tensor_bytes(t, type)});
  }
  return file;
}

void export_gguf(const InteropModel& model, GgufTensorType dtype, const std::string& path,
                 const std::string& source) {
  write_gguf(path, gguf_from_model(model, dtype, source));
}

}  // namespace causal
