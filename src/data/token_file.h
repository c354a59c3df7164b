// The `.tok` token file: a little-endian header, the token ids, then document start offsets (docs/data.md).
// Files are written atomically and read through mmap; opening validates the whole file once so that every
// later access can trust it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "config/data_config.h"
#include "data/tokenizer.h"

namespace causal {

// Version 2 added each document's byte count and the tokenizer model, version 3 an optional loss mask;
// version 1 files (bytes tokenizer only) still open, their byte counts derived from their lengths.
constexpr uint32_t kTokenFileVersion = 3;
constexpr uint32_t kTokenFileOldestVersion = 1;
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
  TokenizerInfo tokenizer;     // identity, vocab size and special ids of the writer (model sha256 included)
  int64_t model_bytes = 0;     // size of the embedded tokenizer model (v2; 0 = none)
  bool document_bytes_known = false;  // v2 records each document's text bytes (false: imported ids)
  bool loss_mask = false;  // v3: one byte per token says whether it counts as a label (instruction data)

  int64_t file_bytes() const;  // exact file length these counts imply
};

// Reads and checks only the header and the file length (cheap: for config validation before training).
// Throws DataError naming the file on anything a full open would also reject at that level.
TokenFileHeader read_token_file_header(const std::string& path);

// The vocab size of data.train's tokenizer: what "vocab": "auto" stands for (load_config's DataVocab).
int64_t train_vocab_size(const DataConfig& data);

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

  // Bytes of text document d was encoded from (what bits per byte divides by; with a loss mask, the bytes
  // of its supervised text only); requires header().document_bytes_known.
  int64_t document_bytes(int64_t d) const;
  // Whether token i is a label the loss counts: always, unless the file has a loss mask that says no (the
  // prompt of an instruction example). A document's BOS is never a label.
  bool supervised(int64_t i) const { return mask_ == nullptr || mask_[i] != 0; }
  // Labels the loss counts in the whole file (every token but the BOS of each document, without a mask).
  int64_t supervised_labels() const { return supervised_labels_; }
  // The tokenizer model embedded in the file (its sha256 verified on open); empty when there is none.
  const std::string& tokenizer_model() const { return model_; }

 private:
  void unmap();
  uint64_t offset_at(int64_t d) const;

  std::string path_;
  TokenFileHeader header_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;     // start of the id section inside the mapping
  const unsigned char* offsets_ = nullptr;    // start of the u64 document offsets
  const unsigned char* doc_bytes_ = nullptr;  // start of the u64 document byte counts (v2)
  const unsigned char* mask_ = nullptr;       // one byte per token, 0 or 1 (v3 with a loss mask)
  int64_t supervised_labels_ = 0;
  std::string model_;
};

// Streams a token file into `out` (seekable, at position 0: the stream write_file_atomically gives), one
// document at a time, so a corpus never has to fit in memory: ids are written as they come, and only two
// u64 per document (and, with a loss mask, one byte per token) are kept until finish() writes the offsets,
// byte counts, mask, model and header.
class TokenFileWriter {
 public:
  // `tokenizer.model_sha256` must be the sha256 of `model` (both empty for no model). `path` names the
  // file in errors. Throws DataError for header fields a reader would refuse.
  // `loss_mask`: the file records which labels count; append then takes each id's flag.
  TokenFileWriter(std::ostream& out, std::string path, TokenizerInfo tokenizer, std::string model,
                  bool document_bytes_known, std::optional<TokenDtype> dtype = std::nullopt,
                  bool loss_mask = false);
  // Appends [BOS, body..., EOS]; `bytes` is the length of the text the body encodes (ignored when byte
  // counts are unknown). Throws DataError naming the id and its token offset for an id >= vocab.
  void add_document(const int64_t* body, size_t count, int64_t bytes);
  void add_document(const std::vector<int64_t>& body, int64_t bytes) {
    add_document(body.data(), body.size(), bytes);
  }
  // The same in parts, for documents larger than memory: begin, append any number of times, end.
  // `supervised` (with a loss mask only; nullptr = all) flags each id as a label the loss counts; the EOS
  // counts when `eos_supervised`.
  void begin_document();
  void append(const int64_t* ids, size_t count, const uint8_t* supervised = nullptr);
  void end_document(int64_t bytes, bool eos_supervised = true);
  // Writes what follows the ids and the header. Throws DataError when no document was added.
  void finish();

  int64_t tokens() const { return static_cast<int64_t>(tokens_); }
  int64_t documents() const { return static_cast<int64_t>(starts_.size()); }

 private:
  void put_id(int64_t id);
  void flush_ids();

  std::ostream& out_;
  std::string path_;
  TokenFileHeader header_;
  std::string model_;
  uint64_t tokens_ = 0;
  std::vector<uint64_t> starts_, bytes_;
  std::vector<unsigned char> buffer_;
  bool loss_mask_ = false;
  std::vector<uint8_t> mask_;
};

// Writes a token file atomically (temp file in the same directory, fsync, rename, fsync of the directory).
// `document_starts` are token indices: first 0, strictly increasing, each document >= 2 tokens starting
// with BOS and ending with EOS; ids < vocab size. The contents are checked before anything is written,
// so the writer never produces a file the reader rejects. `dtype` defaults to smallest_dtype(vocab).
// `document_bytes` (one per document) are the text lengths; empty means derived from the lengths for the
// bytes tokenizer and unknown for any other. `model` is the tokenizer model to embed (empty: none).
// `loss_mask` (one flag per token, 0 at every BOS; empty: none) marks the labels the loss counts.
void write_token_file(const std::string& path, const TokenizerInfo& tokenizer,
                      const std::vector<int64_t>& tokens, const std::vector<int64_t>& document_starts,
                      std::optional<TokenDtype> dtype = std::nullopt,
                      const std::vector<int64_t>& document_bytes = {}, const std::string& model = "",
                      const std::vector<uint8_t>& loss_mask = {});

// Where two token files or a file and a tokenizer meet (train vs val, data vs generation), they must agree
// on the whole tokenizer identity; throws DataError naming both sides.
void check_same_tokenizer(const TokenizerInfo& found, const std::string& found_where,
                          const TokenizerInfo& expected, const std::string& expected_where);

// The model's embedding and output sizes must equal the file's vocab size (ids index the embedding; a
// larger table would train rows no token can reach). Throws DataError naming the file and the field.
void check_model_vocab(const TokenFileHeader& header, const std::string& path, int64_t input_vocab,
                       int64_t output_vocab);

}  // namespace causal
