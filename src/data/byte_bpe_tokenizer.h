// Byte-level BPE as a causal tokenizer: the ids llama.cpp and HF tokenizers give for GPT-2, Llama 3, Qwen2
// and SmolLM vocabularies, for any bytes (decode(encode(x)) == x).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/byte_bpe_model.h"
#include "data/pre_tokenizer.h"
#include "data/tokenizer.h"

namespace causal {

constexpr const char* kByteBpeTokenizer = "byte-bpe";

// encode: added tokens (token types control and user-defined) written in the text become those tokens,
// the longest one where several start at the same byte, leftmost first; the text between them is cut by the
// pre-tokenizer's regexes into words, each word's bytes become GPT-2 alphabet characters and BPE merges them
// by rank (lowest first, leftmost among equals). Words are cached. decode: token texts mapped back to bytes;
// BOS, EOS and PAD produce nothing, other control tokens their text.
class ByteBpeTokenizer : public Tokenizer {
 public:
  // `model_bytes` is the canonical model (byte_bpe_model_bytes); `where` names it in errors. Throws DataError
  // for a malformed model or one without an EOS token.
  ByteBpeTokenizer(std::string model_bytes, const std::string& where);
  ~ByteBpeTokenizer() override;

  const TokenizerInfo& info() const override { return info_; }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  const std::string& model_bytes() const override { return bytes_; }
  // The last place the pre-tokenizer's rule proves safe (SplitRule: line breaks before an ASCII letter),
  // outside any added token, so that encoding the two sides apart gives the ids of the whole. Without
  // one, or for a custom pre-tokenizer or a prefix space (which the right side would gain), after the last
  // newline, else before the last character: the two sides may then encode differently, never losing a byte.
  size_t split_point(std::string_view text) const override;

  const ByteBpeModel& model() const { return model_; }
  // The id of the token whose stored text is `text` (e.g. "<|im_end|>"), if any.
  std::optional<int64_t> token_id(std::string_view text) const;
  const std::string& chat_template() const override { return model_.chat_template; }
  bool adds_bos() const override { return model_.add_bos; }
  // An added token (control or user-defined) written as `text`.
  std::optional<int64_t> special_token_id(std::string_view text) const override;

 private:
  struct MergeTable;
  struct WordCache;

  void encode_segment(std::string_view segment, std::vector<int64_t>& ids) const;
  void encode_word(std::string_view word, std::vector<int64_t>& ids) const;
  void merge_word(std::string_view word, std::vector<int32_t>& symbols) const;
  bool cuts_added_token(std::string_view text, size_t p) const;  // an added token holding "\n" spans p

  std::string bytes_;
  ByteBpeModel model_;
  TokenizerInfo info_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<MergeTable> merges_;
  std::unique_ptr<WordCache> cache_;
  std::unordered_map<std::string, int32_t> vocab_;  // stored token text -> id (first id for duplicates)
  std::array<int32_t, 256> byte_ids_{};             // byte -> id of its GPT-2 alphabet character, or -1
  // Added tokens by first byte, longest first.
  std::array<std::vector<std::pair<std::string, int32_t>>, 256> specials_;
  std::vector<std::string> specials_with_newline_;  // added tokens holding "\n", which split_point avoids
  std::vector<std::string> id_text_;                // id -> the bytes it decodes to
  enum class UnknownBytes { kDrop, kUnk, kFusedUnk } unknown_bytes_ = UnknownBytes::kDrop;
  SplitRule split_rule_ = SplitRule::kNone;  // split_point's proven places, by pre-tokenizer
};

// A byte-level BPE tokenizer from a GGUF file (tokenizer metadata only), an HF tokenizer.json, or a
// canonical model file (.json with "format": "causal byte-bpe 1"). Throws DataError naming the path.
std::unique_ptr<ByteBpeTokenizer> load_byte_bpe(const std::string& path);

}  // namespace causal
