// Byte-level tokenizer and the tokenizer registry.
#include "data/tokenizer.h"

#include "core/errors.h"

namespace causal {

bool TokenizerInfo::operator==(const TokenizerInfo& other) const {
  return name == other.name && vocab_size == other.vocab_size && bos_id == other.bos_id &&
         eos_id == other.eos_id && pad_id == other.pad_id;
}

std::string TokenizerInfo::describe() const {
  return name + " (vocab " + std::to_string(vocab_size) + "; bos " + std::to_string(bos_id) + ", eos " +
         std::to_string(eos_id) + ", pad " + std::to_string(pad_id) + ")";
}

ByteTokenizer::ByteTokenizer() : info_{"bytes", 259, 256, 257, 258} {}

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) {
    if (id >= 0 && id < 256) text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return text;
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name) {
  if (name == "bytes") return std::make_unique<ByteTokenizer>();
  throw DataError("[tokenizer] unknown tokenizer '" + name + "'; known tokenizers: bytes");
}

}  // namespace causal
