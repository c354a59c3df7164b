// A byte-level BPE tokenizer model (GPT-2, Llama 3, Qwen2, SmolLM): read from GGUF metadata or an HF
// tokenizer.json, kept as a canonical JSON of our own (hashed to identify it), written back as HF files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace causal {

struct GgufFile;

// Token types as GGUF numbers them (tokenizer.ggml.token_type).
enum ByteBpeTokenType : int32_t {
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,      // <|im_start|>, <|endoftext|>: matched in text, their text as written
  kTokenUserDefined = 4,  // HF added tokens that are not special: matched in text too
  kTokenUnused = 5,
  kTokenByte = 6,
};

struct ByteBpeModel {
  std::vector<std::string> tokens;   // id -> token text as stored (GPT-2 byte-to-unicode form)
  std::vector<int32_t> token_types;  // ByteBpeTokenType, one per token
  std::vector<std::pair<std::string, std::string>> merges;  // rank order: earlier merges first
  std::string pre_tokenizer;                                // a name of named_pre_tokenizers(), or "custom"
  std::vector<std::string> pre_regexes;                     // what actually splits the text, applied in order
  bool add_prefix_space = false;  // a space before text that does not start with one (HF ByteLevel)
  bool ignore_merges = false;     // a word that is a whole token is that token (Llama 3)
  int64_t bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;  // -1: none
  // A byte whose GPT-2 character is no token: "drop"ped (llama.cpp), the "unk" token for each (HF's BPE
  // with an unk_token), or one unk token for each run of them in a word ("fused-unk": HF with fuse_unk).
  std::string unknown_bytes = "drop";
  bool add_bos = false;       // what the source says (GGUF add_bos_token, HF post-processor)
  std::string chat_template;  // jinja text, may be empty

  bool operator==(const ByteBpeModel& other) const;
};

// GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes stand for themselves, the others for
// U+0100 and up, in byte order. The UTF-8 of the character standing for `byte`.
const std::string& gpt2_byte_char(uint8_t byte);
// The byte a code point stands for, or -1 when it stands for none.
int gpt2_char_byte(uint32_t code_point);

// The canonical model file: compact JSON with sorted keys, so equal models give equal bytes (and SHA-256).
std::string byte_bpe_model_bytes(const ByteBpeModel& model);
// Throws DataError naming `where` for anything that is not a valid model (see check_byte_bpe_model).
ByteBpeModel parse_byte_bpe_model(const std::string& bytes, const std::string& where);

// Consistency every source must give: one type per token, ids in range, every merge's two parts and
// their concatenation in the vocabulary, a known pre-tokenizer name or "custom". Throws DataError.
void check_byte_bpe_model(const ByteBpeModel& model, const std::string& where);

// From GGUF metadata (tokenizer.ggml.*; tensors are not needed). tokenizer.ggml.model must be "gpt2" and
// tokenizer.ggml.pre a known name (missing: "default", as llama.cpp). Throws DataError naming `path`.
ByteBpeModel byte_bpe_from_gguf(const GgufFile& file, const std::string& path);

// From an HF tokenizer.json (BPE model; ByteLevel, Split and Digits pre-tokenizers or a Sequence of them;
// ByteLevel decoder; no normalizer) and, when present, the tokenizer_config.json beside it (bos_token,
// eos_token, pad_token, chat_template, add_bos_token). Anything else is refused naming the key.
ByteBpeModel byte_bpe_from_hf(const std::string& tokenizer_json_path);

// An HF tokenizer.json that HF `tokenizers` loads and that encodes as `model` does, and the
// tokenizer_config.json beside it. Throws DataError for a model HF cannot express (a prefix space with
// regexes other than GPT-2's).
std::string hf_tokenizer_json(const ByteBpeModel& model);
std::string hf_tokenizer_config_json(const ByteBpeModel& model);

}  // namespace causal
