// A SentencePiece model as a causal tokenizer: exact byte round trips for models trained by
// `causal data tokenizer train` (identity normalization, byte fallback), and its trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace causal {

class SentencePieceBackend;

constexpr const char* kSentencePieceTokenizer = "sentencepiece";

// Text goes to SentencePiece in runs of valid UTF-8 without newlines, NUL or U+2581 (which SentencePiece
// uses for the space); every other byte maps straight to its byte-fallback piece <0xXX>. Decoding maps
// pieces back to their text ("\u2581" -> " ") and byte pieces to their byte, so any byte string round-trips
// whatever the model's normalization, as long as the model does not rewrite text itself (see docs/data.md).
class SentencePieceTokenizer : public Tokenizer {
 public:
  // `model` is the serialized model (the contents of a .model file); `where` names it in errors. Throws
  // DataError for bytes that are not a model, a model without BOS/EOS or without the 256 byte pieces.
  SentencePieceTokenizer(std::string model, const std::string& where);
  ~SentencePieceTokenizer() override;

  const TokenizerInfo& info() const override { return info_; }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  const std::string& model_bytes() const override { return model_; }
  // After the last newline (newlines never join a piece); a text without one is cut at the last character
  // boundary, which may segment the two sides differently than the whole (never loses a byte).
  size_t split_point(std::string_view text) const override;

  std::vector<std::string> pieces(std::string_view text) const;  // piece strings of encode(text)

 private:
  std::string model_;
  std::unique_ptr<SentencePieceBackend> processor_;
  TokenizerInfo info_;
  std::vector<int64_t> byte_ids_;     // byte value -> id of its <0xXX> piece
  std::vector<std::string> id_text_;  // id -> the bytes it decodes to (empty for specials)
};

std::unique_ptr<SentencePieceTokenizer> load_sentencepiece(const std::string& path);

enum class SubwordModel { kBpe, kUnigram };

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;  // text files; every line is one training sentence
  SubwordModel model_type = SubwordModel::kBpe;
  int64_t vocab_size = 0;               // specials and the 256 byte pieces included
  std::string out;                      // .model file to write
  double character_coverage = 1.0;      // share of characters covered by pieces; the rest falls back to bytes
  int64_t max_sentence_length = 16384;  // bytes; longer lines are cut into pieces of this length
  int64_t threads = 0;                  // 0 = every core
  // With val_fraction > 0: train only on the documents `data encode` with the same inputs, --doc-separator
  // and --val-fraction puts in the training split (the tokenizer never sees validation text).
  std::string doc_separator;
  double val_fraction = 0.0;
  std::function<void(const std::string&)> progress;  // one line at a time; may be empty
};

// Trains a SentencePiece model with BOS 0, EOS 1, PAD 2, UNK 3, byte fallback and identity normalization
// (no rewriting of text, no dummy prefix, whitespace kept), writes it atomically and returns a summary:
// vocab size and the segmentation of a sample line. Throws DataError (unreadable input, trainer error).
std::string train_tokenizer(const TokenizerTrainOptions& options);

}  // namespace causal
