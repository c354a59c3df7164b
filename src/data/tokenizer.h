// Tokenizers turn text into ids and back: the byte-level one (the default), byte-level BPE (GGUF and HF
// vocabularies) and SentencePiece models.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace causal {

// What a token file records about the tokenizer that wrote it; two sides meet only if all fields agree.
struct TokenizerInfo {
  std::string name;          // identity, e.g. "bytes"; at most kMaxTokenizerName bytes in a token file
  int64_t vocab_size = 0;    // ids are 0 .. vocab_size-1, specials included
  int64_t bos_id = 0;        // starts every document
  int64_t eos_id = 0;        // ends every document; the last input of a document predicts it
  int64_t pad_id = 0;        // fills rows; never attended to and never a label
  std::string model_sha256;  // hex SHA-256 of the tokenizer model file; empty when there is none (bytes)

  bool operator==(const TokenizerInfo& other) const;
  bool operator!=(const TokenizerInfo& other) const { return !(*this == other); }
  std::string describe() const;  // "bytes (vocab 259; bos 256, eos 257, pad 258)" [+ ", model <sha>"]
};

constexpr size_t kMaxTokenizerName = 32;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual const TokenizerInfo& info() const = 0;
  // Ids of the text alone: no BOS/EOS (documents get those from the encoder).
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Text of the ids; specials (BOS, EOS, PAD) produce nothing.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // Where a long text may be cut for encoding in parts: a length in (0, size] (for non-empty text) such that
  // encoding the two sides apart gives the ids of the whole wherever the text allows (bytes: anywhere).
  virtual size_t split_point(std::string_view text) const { return text.size(); }
  // The model file's bytes, stored in token files, run folders and checkpoints; empty for built-ins.
  virtual const std::string& model_bytes() const;
  // For prompts and chat: the chat template (Jinja text) the tokenizer came with, "" for none; whether its
  // model expects BOS before a prompt; the id of a special token written as text, nullopt when `text` is
  // not one (the bytes and SentencePiece tokenizers have none that text can name).
  virtual const std::string& chat_template() const;
  virtual bool adds_bos() const { return true; }
  virtual std::optional<int64_t> special_token_id(std::string_view /*text*/) const { return std::nullopt; }
};

// A cut for split_point where a tokenizer knows no better place: after the last newline, else before the
// last (perhaps incomplete) UTF-8 character; never loses a byte, though the sides may encode differently.
size_t split_after_last_line(std::string_view text);

// One id per byte (0..255), then BOS 256, EOS 257, PAD 258: any byte string round-trips exactly.
class ByteTokenizer : public Tokenizer {
 public:
  ByteTokenizer();
  const TokenizerInfo& info() const override { return info_; }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;

 private:
  TokenizerInfo info_;
};

// "bytes", or the path of: a GGUF file (its byte-level BPE vocabulary; tensors are not read), an HF
// tokenizer.json (a file of that name, or a .json whose top level has "model"), a canonical byte-level BPE
// model file, or a SentencePiece model file (`causal data tokenizer train` writes one). Anything else
// throws DataError listing the choices.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name);

// The tokenizer a token file or run recorded, rebuilt from its identity and model bytes; nullptr when no
// tokenizer is known (ids imported from another trainer). Throws DataError when the model bytes do not
// give the recorded identity.
std::unique_ptr<Tokenizer> tokenizer_for(const TokenizerInfo& info, const std::string& model_bytes);

// A run's tokenizer as the files it keeps in its folder and every checkpoint (Task::run_files).
constexpr const char* kTokenizerInfoFile = "tokenizer.json";    // tokenizer_info_to_json
constexpr const char* kTokenizerModelFile = "tokenizer.model";  // the model bytes, when there is a model
nlohmann::json tokenizer_info_to_json(const TokenizerInfo& info);
// Throws DataError naming `where` for missing or mistyped fields.
TokenizerInfo tokenizer_info_from_json(const nlohmann::json& json, const std::string& where);

// Name of token files whose ids come from another trainer's tokenizer (`causal data import`).
constexpr const char* kImportedTokenizer = "imported";

}  // namespace causal
