// A tokenizer as the consumers list it: every piece with its score and kind. SentencePiece models are read
// from their own file (the protobuf ModelProto, parsed here); the bytes tokenizer becomes GPT-2's
// byte-level alphabet, which llama.cpp and HF tokenizers turn back into exactly the input bytes; byte-level
// BPE models list their tokens and merges as they came.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace causal {

// Piece kinds, numbered as SentencePiece and GGUF's tokenizer.ggml.token_type both number them.
enum class PieceKind : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct Vocab {
  enum class Kind { kBytes, kSentencePieceBpe, kSentencePieceUnigram, kByteBpe };
  Kind kind = Kind::kBytes;
  std::vector<std::string> pieces;  // id -> piece (bytes: GPT-2's printable stand-in for the byte)
  std::vector<float> scores;
  std::vector<PieceKind> kinds;
  int64_t bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;
  bool add_space_prefix = false;  // SentencePiece's add_dummy_prefix
  bool remove_extra_whitespaces = false;
  // Byte-level BPE only: merges in rank order ("left right"), the pre-tokenizer's GGUF name ("" when its
  // regexes match no name llama.cpp knows), whether the source adds BOS, and the chat template (or "").
  std::vector<std::string> merges;
  std::string pre_tokenizer;
  bool add_bos = true;
  std::string chat_template;
};

// The vocab of a run's tokenizer. Throws DataError for an unparsable model file or for a tokenizer with no
// vocab to list ("imported" ids).
Vocab vocab_of(const TokenizerInfo& info, const std::string& model_bytes);

// The pieces, scores and kinds of a SentencePiece model file. Throws DataError when it does not parse.
Vocab parse_sentencepiece(const std::string& model_bytes);

// GPT-2's byte -> printable character map (bytes that are printable Latin-1 stand for themselves, the
// rest move to U+0100 upward), as UTF-8, and its inverse (-1 when `piece` is not one such character).
std::string byte_to_unicode(uint8_t byte);
int byte_from_unicode(const std::string& piece);

}  // namespace causal
