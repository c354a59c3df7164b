// Byte-level BPE models in and out: GGUF metadata, HF tokenizer.json (+ tokenizer_config.json), and our
// canonical JSON.
#include "data/byte_bpe_model.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/errors.h"
#include "data/pre_tokenizer.h"
#include "io/gguf_file.h"

namespace causal {
namespace {

constexpr const char* kCanonicalFormat = "causal byte-bpe 1";

struct Gpt2Alphabet {
  std::string byte_char[256];
  int char_byte[512];  // code point -> byte; every code point of the alphabet is below 0x144
  Gpt2Alphabet() {
    for (int& b : char_byte) b = -1;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int cp = printable ? b : next++;
      // Every code point here is below 0x800: two bytes of UTF-8 at most.
      byte_char[b] =
          cp < 0x80 ? std::string(1, static_cast<char>(cp))
                    : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      char_byte[cp] = b;
    }
  }
};

const Gpt2Alphabet& gpt2_alphabet() {
  static const Gpt2Alphabet alphabet;
  return alphabet;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[tokenizer] cannot read '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError("[tokenizer] error while reading '" + path + "'");
  return bytes;
}

// GGUF metadata accessors: absent keys are nullptr / the fallback, mistyped ones a DataError.
const GgufValue* gguf_key(const GgufFile& file, const std::string& key) { return file.find(key); }

[[noreturn]] void gguf_mistyped(const std::string& path, const std::string& key,
                                const std::string& expected) {
  throw DataError("[tokenizer] " + path + ": GGUF key " + key + " is not " + expected);
}

std::string gguf_string(const GgufFile& file, const std::string& path, const std::string& key,
                        const std::string& fallback) {
  const GgufValue* v = gguf_key(file, key);
  if (v == nullptr) return fallback;
  if (v->type != GgufType::kString) gguf_mistyped(path, key, "a string");
  return std::get<std::string>(v->value);
}

int64_t gguf_int(const GgufFile& file, const std::string& path, const std::string& key, int64_t fallback) {
  const GgufValue* v = gguf_key(file, key);
  if (v == nullptr) return fallback;
  if (std::holds_alternative<int64_t>(v->value) && v->type != GgufType::kArray && v->type != GgufType::kBool)
    return std::get<int64_t>(v->value);
  if (std::holds_alternative<uint64_t>(v->value)) return static_cast<int64_t>(std::get<uint64_t>(v->value));
  gguf_mistyped(path, key, "an integer");
}

bool gguf_bool(const GgufFile& file, const std::string& path, const std::string& key, bool fallback) {
  const GgufValue* v = gguf_key(file, key);
  if (v == nullptr) return fallback;
  if (v->type != GgufType::kBool) gguf_mistyped(path, key, "a bool");
  return std::get<bool>(v->value);
}

// The text of an HF special-token entry: a string, or an object with "content" (AddedToken).
std::string token_content(const nlohmann::json& entry, const std::string& where, const std::string& key) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
    return entry["content"].get<std::string>();
  throw DataError("[tokenizer] " + where + ": " + key +
                  " is neither a string nor an object with \"content\"");
}

}  // namespace

bool ByteBpeModel::operator==(const ByteBpeModel& other) const {
  return tokens == other.tokens && token_types == other.token_types && merges == other.merges &&
         pre_tokenizer == other.pre_tokenizer && pre_regexes == other.pre_regexes &&
         add_prefix_space == other.add_prefix_space && ignore_merges == other.ignore_merges &&
         bos_id == other.bos_id && eos_id == other.eos_id && pad_id == other.pad_id &&
         unk_id == other.unk_id && unknown_bytes == other.unknown_bytes && add_bos == other.add_bos &&
         chat_template == other.chat_template;
}

const std::string& gpt2_byte_char(uint8_t byte) { return gpt2_alphabet().byte_char[byte]; }

int gpt2_char_byte(uint32_t code_point) {
  return code_point < 512 ? gpt2_alphabet().char_byte[code_point] : -1;
}

void check_byte_bpe_model(const ByteBpeModel& model, const std::string& where) {
  const std::string at = "[tokenizer] " + where + ": ";
  if (model.tokens.empty()) throw DataError(at + "the vocabulary is empty");
  if (model.token_types.size() != model.tokens.size())
    throw DataError(at + std::to_string(model.token_types.size()) + " token types for " +
                    std::to_string(model.tokens.size()) + " tokens");
  for (size_t i = 0; i < model.token_types.size(); ++i) {
    if (model.token_types[i] < kTokenNormal || model.token_types[i] > kTokenByte)
      throw DataError(at + "token " + std::to_string(i) + " has type " +
                      std::to_string(model.token_types[i]) + ", expected 1..6 (GGUF token types)");
  }
  const auto n = static_cast<int64_t>(model.tokens.size());
  const std::pair<const char*, int64_t> ids[] = {
      {"bos", model.bos_id}, {"eos", model.eos_id}, {"pad", model.pad_id}, {"unk", model.unk_id}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= n)
      throw DataError(at + name + " id " + std::to_string(id) + " is outside the vocabulary of " +
                      std::to_string(n) + " tokens");
  }
  if (model.unknown_bytes != "drop" && model.unknown_bytes != "unk" && model.unknown_bytes != "fused-unk")
    throw DataError(at + "unknown_bytes is '" + model.unknown_bytes + "', expected drop, unk or fused-unk");
  if (model.unknown_bytes != "drop" && model.unk_id < 0)
    throw DataError(at + "unknown_bytes is '" + model.unknown_bytes + "' but the model has no unknown token");
  if (model.pre_tokenizer != "custom" && find_named_pre_tokenizer(model.pre_tokenizer) == nullptr)
    throw DataError(at + "unknown pre-tokenizer '" + model.pre_tokenizer + "': expected custom or one of " +
                    known_pre_tokenizer_names());
  std::unordered_map<std::string, int64_t> vocab;
  vocab.reserve(model.tokens.size());
  for (int64_t i = 0; i < n; ++i) vocab.emplace(model.tokens[i], i);
  for (size_t r = 0; r < model.merges.size(); ++r) {
    const auto& [left, right] = model.merges[r];
    for (const std::string* part : {&left, &right}) {
      if (!vocab.count(*part))
        throw DataError(at + "merge " + std::to_string(r) + " ('" + left + "' '" + right + "'): '" + *part +
                        "' is not a token");
    }
    if (!vocab.count(left + right))
      throw DataError(at + "merge " + std::to_string(r) + " ('" + left + "' '" + right + "') makes '" + left +
                      right + "', which is not a token");
  }
}

std::string byte_bpe_model_bytes(const ByteBpeModel& model) {
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [left, right] : model.merges) merges.push_back({left, right});
  const nlohmann::json json = {{"format", kCanonicalFormat},
                               {"tokens", model.tokens},
                               {"token_types", model.token_types},
                               {"merges", std::move(merges)},
                               {"pre_tokenizer", model.pre_tokenizer},
                               {"pre_regexes", model.pre_regexes},
                               {"add_prefix_space", model.add_prefix_space},
                               {"ignore_merges", model.ignore_merges},
                               {"bos_id", model.bos_id},
                               {"eos_id", model.eos_id},
                               {"pad_id", model.pad_id},
                               {"unk_id", model.unk_id},
                               {"unknown_bytes", model.unknown_bytes},
                               {"add_bos", model.add_bos},
                               {"chat_template", model.chat_template}};
  try {
    return json.dump();
  } catch (const nlohmann::json::exception& e) {
    // Token texts that are not UTF-8 have no JSON form.
    throw DataError(std::string("[tokenizer] the byte-level BPE model cannot be written as JSON (") +
                    e.what() + ")");
  }
}

ByteBpeModel parse_byte_bpe_model(const std::string& bytes, const std::string& where) {
  ByteBpeModel model;
  try {
    const nlohmann::json json = nlohmann::json::parse(bytes);
    if (!json.is_object() || json.value("format", std::string()) != kCanonicalFormat)
      throw DataError("[tokenizer] " + where + ": not a byte-level BPE model (expected \"format\": \"" +
                      kCanonicalFormat + "\")");
    model.tokens = json.at("tokens").get<std::vector<std::string>>();
    model.token_types = json.at("token_types").get<std::vector<int32_t>>();
    for (const auto& merge : json.at("merges")) {
      if (!merge.is_array() || merge.size() != 2)
        throw DataError("[tokenizer] " + where + ": a merge is not a pair of strings: " + merge.dump());
      model.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
    model.pre_tokenizer = json.at("pre_tokenizer").get<std::string>();
    model.pre_regexes = json.at("pre_regexes").get<std::vector<std::string>>();
    model.add_prefix_space = json.at("add_prefix_space").get<bool>();
    model.ignore_merges = json.at("ignore_merges").get<bool>();
    model.bos_id = json.at("bos_id").get<int64_t>();
    model.eos_id = json.at("eos_id").get<int64_t>();
    model.pad_id = json.at("pad_id").get<int64_t>();
    model.unk_id = json.at("unk_id").get<int64_t>();
    model.unknown_bytes = json.at("unknown_bytes").get<std::string>();
    model.add_bos = json.at("add_bos").get<bool>();
    model.chat_template = json.at("chat_template").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError("[tokenizer] " + where + ": malformed byte-level BPE model (" + e.what() + ")");
  }
  check_byte_bpe_model(model, where);
  return model;
}

ByteBpeModel byte_bpe_from_gguf(const GgufFile& file, const std::string& path) {
  const std::string at = "[tokenizer] " + path + ": ";
  const std::string kind = gguf_string(file, path, "tokenizer.ggml.model", "");
  if (kind.empty()) throw DataError(at + "no tokenizer.ggml.model: the GGUF file holds no tokenizer");
  if (kind != "gpt2")
    throw DataError(at + "tokenizer.ggml.model is '" + kind +
                    "'; causal reads only byte-level BPE vocabularies (\"gpt2\") from GGUF files");
  const std::string pre = gguf_string(file, path, "tokenizer.ggml.pre", "default");
  const NamedPreTokenizer* named = find_named_pre_tokenizer(pre);
  if (named == nullptr)
    throw DataError(at + "tokenizer.ggml.pre is '" + pre +
                    "', which causal does not know; known: " + known_pre_tokenizer_names());
  ByteBpeModel model;
  model.pre_tokenizer = named->name;
  model.pre_regexes = named->regexes;
  model.ignore_merges = named->ignore_merges;
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufType::kArray || tokens->element != GgufType::kString)
    throw DataError(at + "tokenizer.ggml.tokens is missing or not an array of strings");
  model.tokens = std::get<std::vector<std::string>>(tokens->value);
  if (const GgufValue* types = file.find("tokenizer.ggml.token_type")) {
    if (types->type != GgufType::kArray || !std::holds_alternative<std::vector<int64_t>>(types->value))
      gguf_mistyped(path, "tokenizer.ggml.token_type", "an array of integers");
    for (int64_t t : std::get<std::vector<int64_t>>(types->value))
      model.token_types.push_back(static_cast<int32_t>(t));
  } else {
    model.token_types.assign(model.tokens.size(), kTokenNormal);
  }
  const GgufValue* merges = file.find("tokenizer.ggml.merges");
  if (merges == nullptr || merges->type != GgufType::kArray || merges->element != GgufType::kString)
    throw DataError(at + "tokenizer.ggml.merges is missing or not an array of strings");
  for (const std::string& merge : std::get<std::vector<std::string>>(merges->value)) {
    // The parts are separated by the first space after the first character (a part may be a lone space).
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos)
      throw DataError(at + "tokenizer.ggml.merges holds '" + merge +
                      "', expected two tokens separated by a space");
    model.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  model.bos_id = gguf_int(file, path, "tokenizer.ggml.bos_token_id", -1);
  model.eos_id = gguf_int(file, path, "tokenizer.ggml.eos_token_id", -1);
  model.pad_id = gguf_int(file, path, "tokenizer.ggml.padding_token_id", -1);
  model.unk_id = gguf_int(file, path, "tokenizer.ggml.unknown_token_id", -1);
  // llama.cpp's default for a missing add_bos_token depends on the pre-tokenizer: only Llama 3 adds one.
  model.add_bos = gguf_bool(file, path, "tokenizer.ggml.add_bos_token", named->name == "llama-bpe");
  model.chat_template = gguf_string(file, path, "tokenizer.chat_template", "");
  check_byte_bpe_model(model, path);
  return model;
}

namespace {

// The regexes (and prefix space) of one HF pre-tokenizer, appended to `model`. `first` says whether it is
// the first step: a prefix space is only expressible before any split.
void read_hf_pre_tokenizer(const nlohmann::json& pre, const std::string& where, const std::string& key,
                           bool first, bool last, ByteBpeModel& model) {
  const std::string type = pre.value("type", std::string());
  const std::string at = "[tokenizer] " + where + ": " + key;
  if (type == "Sequence") {
    const auto& steps = pre.at("pretokenizers");
    for (size_t i = 0; i < steps.size(); ++i)
      read_hf_pre_tokenizer(steps[i], where, key + ".pretokenizers[" + std::to_string(i) + "]",
                            first && i == 0, last && i + 1 == steps.size(), model);
  } else if (type == "ByteLevel") {
    if (!last) throw DataError(at + " is ByteLevel before other pre-tokenizers; causal needs it last");
    if (pre.value("add_prefix_space", false)) {
      if (!first)
        throw DataError(at +
                        ".add_prefix_space is true after other pre-tokenizers (HF would prefix every "
                        "piece); causal supports it only when ByteLevel is the only pre-tokenizer");
      model.add_prefix_space = true;
    }
    if (pre.value("use_regex", true)) model.pre_regexes.push_back(kGpt2Regex);
  } else if (type == "Split") {
    const std::string behavior = pre.value("behavior", std::string());
    if (behavior != "Isolated")
      throw DataError(at + ".behavior is '" + behavior + "'; causal supports only Isolated");
    if (pre.value("invert", false)) throw DataError(at + ".invert is true; causal supports only false");
    const auto& pattern = pre.at("pattern");
    if (pattern.contains("Regex")) {
      model.pre_regexes.push_back(pattern["Regex"].get<std::string>());
    } else if (pattern.contains("String")) {
      const std::string literal = pattern["String"].get<std::string>();
      if (literal.find("\\E") != std::string::npos)
        throw DataError(at + ".pattern.String holds \\E, which causal cannot quote");
      model.pre_regexes.push_back("\\Q" + literal + "\\E");
    } else {
      throw DataError(at + ".pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    }
  } else if (type == "Digits") {
    model.pre_regexes.push_back(pre.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else {
    throw DataError(at + ".type is '" + type + "'; causal supports ByteLevel, Split, Digits and Sequence");
  }
}

}  // namespace

ByteBpeModel byte_bpe_from_hf(const std::string& tokenizer_json_path) {
  const std::string& where = tokenizer_json_path;
  const std::string at = "[tokenizer] " + where + ": ";
  ByteBpeModel model;
  try {
    const nlohmann::json json = nlohmann::json::parse(read_text_file(tokenizer_json_path));
    const auto& m = json.at("model");
    if (m.value("type", std::string()) != "BPE")
      throw DataError(at + "model.type is '" + m.value("type", std::string()) + "'; causal reads only BPE");
    for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(key) && !m[key].is_null() && !(m[key].is_string() && m[key].get<std::string>().empty()))
        throw DataError(at + "model." + key + " is " + m[key].dump() + "; causal supports only null");
    }
    const bool byte_fallback = m.value("byte_fallback", false);
    model.ignore_merges = m.value("ignore_merges", false);
    if (json.contains("normalizer") && !json["normalizer"].is_null()) {
      const auto& normalizer = json["normalizer"];
      const bool empty_sequence = normalizer.value("type", std::string()) == "Sequence" &&
                                  normalizer.contains("normalizers") && normalizer["normalizers"].empty();
      // A normalizer rewrites text, which would break exact byte round trips (and needs Unicode tables).
      if (!empty_sequence)
        throw DataError(at + "normalizer is " + normalizer.value("type", normalizer.dump()) +
                        "; causal supports only null (no normalization)");
    }
    // The decoder: ByteLevel, alone or after the steps transformers' GGUF conversion puts before it, which
    // change nothing for a byte-level vocabulary (checked below, once the tokens are known).
    std::vector<std::string> decoder_steps;
    if (json.contains("decoder") && !json["decoder"].is_null()) {
      const auto& decoder = json["decoder"];
      if (decoder.value("type", std::string()) == "Sequence") {
        for (const auto& step : decoder.at("decoders"))
          decoder_steps.push_back(step.value("type", std::string()));
      } else {
        decoder_steps.push_back(decoder.value("type", std::string()));
      }
      for (size_t i = 0; i < decoder_steps.size(); ++i) {
        const std::string& type = decoder_steps[i];
        const bool last = i + 1 == decoder_steps.size();
        if ((type == "ByteLevel" && last) || (!last && (type == "ByteFallback" || type == "Fuse"))) continue;
        if (!last && type == "Replace" && decoder["decoders"][i].value("content", std::string()) == " ")
          continue;
        throw DataError(at + "decoder holds " + type + (last ? " last" : " before ByteLevel") +
                        "; causal supports ByteLevel, after ByteFallback, Fuse or Replace(..., \" \") steps");
      }
    }
    // Ids: the model's vocabulary, then added tokens (which may also name ids of the vocabulary).
    std::map<int64_t, std::string> by_id;
    std::map<int64_t, int32_t> types;
    for (const auto& [text, id] : m.at("vocab").items()) {
      if (!by_id.emplace(id.get<int64_t>(), text).second)
        throw DataError(at + "model.vocab gives id " + id.dump() + " to two tokens");
    }
    if (json.contains("added_tokens")) {
      for (const auto& added : json["added_tokens"]) {
        const int64_t id = added.at("id").get<int64_t>();
        const std::string content = added.at("content").get<std::string>();
        for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
          if (added.value(flag, false))
            throw DataError(at + "added token '" + content + "' has " + flag +
                            " true; causal matches added tokens as written only");
        }
        auto [it, inserted] = by_id.emplace(id, content);
        if (!inserted && it->second != content)
          throw DataError(at + "added token '" + content + "' has id " + std::to_string(id) + " of '" +
                          it->second + "'");
        types[id] = added.value("special", false) ? kTokenControl : kTokenUserDefined;
      }
    }
    int64_t expected = 0;
    for (const auto& [id, text] : by_id) {
      if (id != expected)
        throw DataError(at + "no token has id " + std::to_string(expected) +
                        "; ids must run from 0 without gaps");
      model.tokens.push_back(text);
      auto type = types.find(id);
      model.token_types.push_back(type == types.end() ? kTokenNormal : type->second);
      ++expected;
    }
    for (const auto& merge : m.at("merges")) {
      if (merge.is_string()) {
        const std::string text = merge.get<std::string>();
        const size_t space = text.find(' ', 1);
        if (space == std::string::npos)
          throw DataError(at + "model.merges holds '" + text + "', expected two tokens separated by a space");
        model.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
      } else if (merge.is_array() && merge.size() == 2) {
        model.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      } else {
        throw DataError(at + "model.merges holds " + merge.dump() + ", expected \"a b\" or [\"a\", \"b\"]");
      }
    }
    std::unordered_map<std::string, int64_t> vocab;
    for (size_t i = 0; i < model.tokens.size(); ++i) vocab.emplace(model.tokens[i], static_cast<int64_t>(i));
    // Byte fallback (model and decoder) acts only through <0xHH> tokens, and the decoder's Replace only on
    // tokens holding U+2581: a byte-level vocabulary without them is decoded by ByteLevel alone.
    if (byte_fallback || decoder_steps.size() > 1) {
      for (size_t i = 0; i < model.tokens.size(); ++i) {
        const std::string& text = model.tokens[i];
        const bool byte_token = text.size() == 6 && text.rfind("<0x", 0) == 0 && text.back() == '>';
        if (byte_token ||
            (model.token_types[i] == kTokenNormal && text.find("\xe2\x96\x81") != std::string::npos))
          throw DataError(
              at + "token '" + text +
              "' would be read by byte fallback or rewritten by the decoder's steps before ByteLevel; "
              "causal supports those only where they never apply");
      }
    }
    auto id_of = [&](const std::string& text, const std::string& key) {
      auto it = vocab.find(text);
      if (it == vocab.end()) throw DataError(at + key + " '" + text + "' is not a token");
      return it->second;
    };
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      // HF's BPE gives its unk_token for a character that is no token, one per run with fuse_unk.
      model.unk_id = id_of(m["unk_token"].get<std::string>(), "model.unk_token");
      model.unknown_bytes = m.value("fuse_unk", false) ? "fused-unk" : "unk";
    }
    if (json.contains("pre_tokenizer") && !json["pre_tokenizer"].is_null())
      read_hf_pre_tokenizer(json["pre_tokenizer"], where, "pre_tokenizer", true, true, model);
    const std::string name = pre_tokenizer_name(model.pre_regexes);
    model.pre_tokenizer = name.empty() ? "custom" : name;
    // The post-processor says which specials surround a text: BOS before $A, EOS after it.
    if (json.contains("post_processor") && !json["post_processor"].is_null()) {
      const auto& post = json["post_processor"];
      const std::string type = post.value("type", std::string());
      if (type == "TemplateProcessing") {
        bool before = true;
        for (const auto& item : post.at("single")) {
          if (item.contains("Sequence")) {
            before = false;
          } else if (item.contains("SpecialToken")) {
            const std::string token = item["SpecialToken"].at("id").get<std::string>();
            const auto& entry = post.at("special_tokens").at(token);
            const int64_t id = entry.at("ids").at(0).get<int64_t>();
            if (before) {
              model.bos_id = id;
              model.add_bos = true;
            } else {
              model.eos_id = id;
            }
          }
        }
      } else if (type != "ByteLevel") {
        throw DataError(at + "post_processor.type is '" + type +
                        "'; causal supports ByteLevel and TemplateProcessing");
      }
    }
    // tokenizer_config.json beside it names the specials and the chat template.
    const std::filesystem::path config_path =
        std::filesystem::path(tokenizer_json_path).parent_path() / "tokenizer_config.json";
    if (std::filesystem::is_regular_file(config_path)) {
      const std::string config_where = config_path.string();
      const nlohmann::json config = nlohmann::json::parse(read_text_file(config_path.string()));
      const std::pair<const char*, int64_t*> specials[] = {{"bos_token", &model.bos_id},
                                                           {"eos_token", &model.eos_id},
                                                           {"pad_token", &model.pad_id},
                                                           {"unk_token", &model.unk_id}};
      for (const auto& [key, id] : specials) {
        // The model's own unk_token decides what encoding gives; the config's names one only for a model
        // without.
        if (id == &model.unk_id && model.unk_id >= 0) continue;
        if (config.contains(key) && !config[key].is_null())
          *id = id_of(token_content(config[key], config_where, key), config_where + " " + key);
      }
      if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean())
        model.add_bos = config["add_bos_token"].get<bool>();
      if (config.contains("chat_template")) {
        const auto& chat = config["chat_template"];
        if (chat.is_string()) {
          model.chat_template = chat.get<std::string>();
        } else if (chat.is_array()) {
          for (const auto& named : chat)
            if (named.value("name", std::string()) == "default")
              model.chat_template = named.at("template").get<std::string>();
        } else if (!chat.is_null()) {
          throw DataError("[tokenizer] " + config_where + ": chat_template is neither a string nor a list");
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(at + "malformed tokenizer.json (" + e.what() + ")");
  }
  check_byte_bpe_model(model, where);
  return model;
}

std::string hf_tokenizer_json(const ByteBpeModel& model) {
  using Json = nlohmann::ordered_json;
  const bool gpt2_only = pre_tokenizer_name(model.pre_regexes) == "gpt-2";
  if (model.add_prefix_space && !gpt2_only && !model.pre_regexes.empty())
    throw DataError(
        "[tokenizer] HF tokenizer.json cannot prefix a space before regexes other than GPT-2's (the model's "
        "pre-tokenizer is " +
        model.pre_tokenizer + ")");
  Json added = Json::array();
  for (size_t i = 0; i < model.tokens.size(); ++i) {
    const int32_t type = model.token_types[i];
    if (type != kTokenControl && type != kTokenUserDefined) continue;
    added.push_back({{"id", i},
                     {"content", model.tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", type == kTokenControl}});
  }
  Json pre;
  if (model.pre_regexes.empty() || gpt2_only) {
    pre = {{"type", "ByteLevel"},
           {"add_prefix_space", model.add_prefix_space},
           {"trim_offsets", true},
           {"use_regex", gpt2_only}};
  } else {
    Json steps = Json::array();
    for (const std::string& regex : model.pre_regexes)
      steps.push_back(
          {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
    steps.push_back(
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
    pre = {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
  }
  Json post = nullptr;
  if (model.add_bos && model.bos_id >= 0) {
    const std::string& bos = model.tokens[model.bos_id];
    const Json bos_item = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
    post = {{"type", "TemplateProcessing"},
            {"single", {bos_item, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair",
             {bos_item,
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
              bos_item,
              {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
            {"special_tokens", {{bos, {{"id", bos}, {"ids", {model.bos_id}}, {"tokens", {bos}}}}}}};
  }
  Json vocab = Json::object();
  for (size_t i = 0; i < model.tokens.size(); ++i) vocab[model.tokens[i]] = i;
  Json merges = Json::array();
  for (const auto& [left, right] : model.merges) merges.push_back({left, right});
  const Json json = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
      {"normalizer", nullptr},
      {"pre_tokenizer", std::move(pre)},
      {"post_processor", std::move(post)},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", model.unknown_bytes != "drop" ? Json(model.tokens[model.unk_id]) : Json(nullptr)},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", model.unknown_bytes == "fused-unk"},
        {"byte_fallback", false},
        {"ignore_merges", model.ignore_merges},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merges)}}}};
  return json.dump(2) + "\n";
}

std::string hf_tokenizer_config_json(const ByteBpeModel& model) {
  using Json = nlohmann::ordered_json;
  auto token = [&](int64_t id) { return id >= 0 ? Json(model.tokens[id]) : Json(nullptr); };
  Json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                 {"add_bos_token", model.add_bos},
                 {"add_eos_token", false},
                 {"bos_token", token(model.bos_id)},
                 {"eos_token", token(model.eos_id)},
                 {"pad_token", token(model.pad_id)},
                 {"unk_token", token(model.unk_id)},
                 {"clean_up_tokenization_spaces", false}};
  if (!model.chat_template.empty()) config["chat_template"] = model.chat_template;
  return config.dump(2) + "\n";
}

}  // namespace causal
