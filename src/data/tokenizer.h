// Tokenizers turn text into ids and back; the byte-level one is the default and the only built-in.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace causal {

// What a token file records about the tokenizer that wrote it; two sides meet only if all fields agree.
struct TokenizerInfo {
  std::string name;        // identity, e.g. "bytes"; at most kMaxTokenizerName bytes in a token file
  int64_t vocab_size = 0;  // ids are 0 .. vocab_size-1, specials included
  int64_t bos_id = 0;      // starts every document
  int64_t eos_id = 0;      // ends every document; the last input of a document predicts it
  int64_t pad_id = 0;      // fills rows; never attended to and never a label

  bool operator==(const TokenizerInfo& other) const;
  bool operator!=(const TokenizerInfo& other) const { return !(*this == other); }
  std::string describe() const;  // "bytes (vocab 259; bos 256, eos 257, pad 258)"
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
};

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

// "bytes" is the only tokenizer so far; any other name throws DataError listing the known ones.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name);

}  // namespace causal
