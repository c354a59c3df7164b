// Byte-level tokenizer and the tokenizer registry.
#include "data/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "data/byte_bpe_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "io/json_integer.h"

namespace causal {

bool TokenizerInfo::operator==(const TokenizerInfo& other) const {
  return name == other.name && vocab_size == other.vocab_size && bos_id == other.bos_id &&
         eos_id == other.eos_id && pad_id == other.pad_id && model_sha256 == other.model_sha256;
}

std::string TokenizerInfo::describe() const {
  return name + " (vocab " + std::to_string(vocab_size) + "; bos " + std::to_string(bos_id) + ", eos " +
         std::to_string(eos_id) + ", pad " + std::to_string(pad_id) +
         (model_sha256.empty() ? "" : ", model sha256 " + model_sha256.substr(0, 12)) + ")";
}

const std::string& Tokenizer::model_bytes() const {
  static const std::string none;
  return none;
}

const std::string& Tokenizer::chat_template() const {
  static const std::string none;
  return none;
}

size_t split_after_last_line(std::string_view text) {
  const size_t newline = text.rfind('\n');
  if (newline != std::string_view::npos) return newline + 1;
  size_t cut = text.size();
  while (cut > 0 && text.size() - cut < 3 && (static_cast<unsigned char>(text[cut - 1]) & 0xC0) == 0x80)
    --cut;
  if (cut > 0 && static_cast<unsigned char>(text[cut - 1]) >= 0xC0) --cut;
  return cut > 0 ? cut : text.size();
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

namespace {

bool has_suffix(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// A .json file is a byte-level BPE model when it is named tokenizer.json, or its top level has "model" (HF)
// or "format" (our canonical model file).
bool is_byte_bpe_json(const std::string& path) {
  if (std::filesystem::path(path).filename() == "tokenizer.json") return true;
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json json = nlohmann::json::parse(bytes, nullptr, false);
  return json.is_object() && (json.contains("model") || json.contains("format"));
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name) {
  if (name == "bytes") return std::make_unique<ByteTokenizer>();
  if (std::filesystem::is_regular_file(name)) {
    if (has_suffix(name, ".gguf") || (has_suffix(name, ".json") && is_byte_bpe_json(name)))
      return load_byte_bpe(name);
    return load_sentencepiece(name);
  }
  throw DataError(
      "[tokenizer] unknown tokenizer '" + name +
      "': expected bytes, or the path of a SentencePiece .model file, a GGUF file with a byte-level "
      "BPE vocabulary (.gguf) or an HF tokenizer.json (no such file)");
}

nlohmann::json tokenizer_info_to_json(const TokenizerInfo& info) {
  return {{"name", info.name},     {"vocab_size", info.vocab_size}, {"bos_id", info.bos_id},
          {"eos_id", info.eos_id}, {"pad_id", info.pad_id},         {"model_sha256", info.model_sha256}};
}

TokenizerInfo tokenizer_info_from_json(const nlohmann::json& json, const std::string& where) {
  try {
    for (const char* key : {"vocab_size", "bos_id", "eos_id", "pad_id"}) {
      if (!json_integer_fits<int64_t>(json.at(key)))
        throw DataError("[tokenizer] " + where + ": malformed tokenizer record (" + key +
                        " is not an integer)");
    }
    TokenizerInfo info;
    info.name = json.at("name").get<std::string>();
    info.vocab_size = json.at("vocab_size").get<int64_t>();
    info.bos_id = json.at("bos_id").get<int64_t>();
    info.eos_id = json.at("eos_id").get<int64_t>();
    info.pad_id = json.at("pad_id").get<int64_t>();
    info.model_sha256 = json.at("model_sha256").get<std::string>();
    return info;
  } catch (const nlohmann::json::exception& e) {
    throw DataError("[tokenizer] " + where + ": malformed tokenizer record (" + e.what() + ")");
  }
}

std::unique_ptr<Tokenizer> tokenizer_for(const TokenizerInfo& info, const std::string& model_bytes) {
  std::unique_ptr<Tokenizer> tokenizer;
  if (info.name == "bytes" && model_bytes.empty()) {
    tokenizer = std::make_unique<ByteTokenizer>();
  } else if (info.name == kSentencePieceTokenizer && !model_bytes.empty()) {
    tokenizer = std::make_unique<SentencePieceTokenizer>(model_bytes, "the recorded tokenizer model");
  } else if (info.name == kByteBpeTokenizer && !model_bytes.empty()) {
    tokenizer = std::make_unique<ByteBpeTokenizer>(model_bytes, "the recorded tokenizer model");
  } else if (info.name == kImportedTokenizer) {
    return nullptr;
  } else {
    throw DataError("[tokenizer] no tokenizer for " + info.describe() +
                    (model_bytes.empty() ? " (its model file is missing)" : ""));
  }
  if (tokenizer->info() != info) {
    throw DataError("[tokenizer] recorded tokenizer " + info.describe() + " differs from the one rebuilt, " +
                    tokenizer->info().describe());
  }
  return tokenizer;
}

}  // namespace causal
