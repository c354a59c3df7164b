// The `.tok` token file: a little-endian header, the token ids, then document start offsets (docs/data.md).
// Files are written atomically and read through mmap; opening validates the whole file once so that every
// later access can trust it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace causal {

constexpr uint32_t kTokenFileVersion = 1;
constexpr size_t kTokenFileHeaderBytes = 128;

enum class TokenDtype { kU16, kU32 };
int64_t dtype_bytes(TokenDtype dtype);
std::string to_string(TokenDtype dtype);  // "u16" | "u32"
// u16 when every id of the vocabulary fits in it, else u32.
TokenDtype smallest_dtype(int64_t vocab_size);

struct TokenFileHeader {
  uint32_t version = kTokenFileVersion;
  TokenDtype dtype = TokenDtype::kU16;
  int64_t token_count = 0;     // N: ids stored, BOS/EOS of every document included
  int64_t document_count = 0;  // D: documents; document d is tokens [start[d], start[d+1]) with start[D] = N
  TokenizerInfo tokenizer;     // identity, vocab size and special ids of the writer

  int64_t file_bytes() const;  // exact file length these counts imply
};

// Reads and checks only the header and the file length (cheap: for config validation before training).
// Throws DataError naming the file on anything a full open would also reject at that level.
TokenFileHeader read_token_file_header(const std::string& path);

// A validated, read-only, memory-mapped token file. Move-only; the mapping lives as long as the object.
class TokenFile {
 public:
  // Maps `path` and checks header, length, offsets (0 first, strictly increasing, every document holding
  // at least BOS and EOS) and every id (< vocab size). Throws DataError with file, offset and id.
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  const TokenFileHeader& header() const { return header_; }
  const TokenizerInfo& tokenizer() const { return header_.tokenizer; }
  int64_t num_tokens() const { return header_.token_count; }
  int64_t num_documents() const { return header_.document_count; }

  int64_t document_start(int64_t d) const;   // token index of document d's BOS
  int64_t document_length(int64_t d) const;  // stored tokens of document d (BOS and EOS included, >= 2)
  int64_t token(int64_t i) const;            // id at token index i (no bounds check: callers index validly)
  // Copies ids [begin, begin + count) into out[0 .. count-1].
  void read_tokens(int64_t begin, int64_t count, int64_t* out) const;
  std::vector<int64_t> document(int64_t d) const;

 private:
  void unmap();
  uint64_t offset_at(int64_t d) const;

  std::string path_;
  TokenFileHeader header_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;   // start of the id section inside the mapping
  const unsigned char* offsets_ = nullptr;  // start of the u64 document offsets
};

// Writes a token file atomically (temp file in the same directory, fsync, rename, fsync of the directory).
// `document_starts` are token indices: first 0, strictly increasing, each document >= 2 tokens starting
// with BOS and ending with EOS; ids < vocab size. The contents are checked before anything is written,
// so the writer never produces a file the reader rejects. `dtype` defaults to smallest_dtype(vocab).
void write_token_file(const std::string& path, const TokenizerInfo& tokenizer,
                      const std::vector<int64_t>& tokens, const std::vector<int64_t>& document_starts,
                      std::optional<TokenDtype> dtype = std::nullopt);

// Where two token files or a file and a tokenizer meet (train vs val, data vs generation), they must agree
// on the whole tokenizer identity; throws DataError naming both sides.
void check_same_tokenizer(const TokenizerInfo& found, const std::string& found_where,
                          const TokenizerInfo& expected, const std::string& expected_where);

// The model's embedding and output sizes must equal the file's vocab size (ids index the embedding; a
// larger table would train rows no token can reach). Throws DataError naming the file and the field.
void check_model_vocab(const TokenFileHeader& header, const std::string& path, int64_t input_vocab,
                       int64_t output_vocab);

}  // namespace causal
