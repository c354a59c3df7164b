// Byte-level BPE encoding and decoding, with the merge table and word cache that make it fast.
#include "data/byte_bpe_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>

#include "core/errors.h"
#include "data/pre_tokenizer.h"
#include "io/gguf_file.h"
#include "io/sha256.h"

namespace causal {

// (left id, right id) -> (rank, merged id), open addressing: the lookup in BPE's inner loop.
struct ByteBpeTokenizer::MergeTable {
  struct Slot {
    uint64_t key = ~uint64_t{0};
    int32_t rank = 0;
    int32_t id = 0;
  };
  std::vector<Slot> slots;
  uint64_t mask = 0;

  static uint64_t key_of(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  explicit MergeTable(size_t n) {
    size_t capacity = 16;
    while (capacity < 2 * n) capacity *= 2;
    slots.resize(capacity);
    mask = capacity - 1;
  }
  // The first (lowest-rank) merge of a pair wins, as in HF and llama.cpp.
  void insert(int32_t left, int32_t right, int32_t rank, int32_t id) {
    const uint64_t key = key_of(left, right);
    for (uint64_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == key) return;
      if (slots[i].key == ~uint64_t{0}) {
        slots[i] = {key, rank, id};
        return;
      }
    }
  }
  const Slot* find(int32_t left, int32_t right) const {
    const uint64_t key = key_of(left, right);
    for (uint64_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == key) return &slots[i];
      if (slots[i].key == ~uint64_t{0}) return nullptr;
    }
  }
};

// Word -> ids, shared by the threads that encode with one tokenizer: shards with a lock each, every shard
// emptied when it grows past its bound (memory stays bounded on text with endless distinct words).
struct ByteBpeTokenizer::WordCache {
  static constexpr size_t kShards = 64;
  static constexpr size_t kShardEntries = 16384;
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> words;
  };
  Shard shards[kShards];
};

namespace {

// Code points of a token's text, or false when it is not UTF-8.
bool decode_utf8(const std::string& text, std::vector<uint32_t>& out) {
  out.clear();
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && c < 0xC0) return false;
    if (i + n > text.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    out.push_back(cp);
    i += n;
  }
  return true;
}

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_printable_ascii_nonspace(char c) { return c > ' ' && c < 0x7F; }

}  // namespace

ByteBpeTokenizer::ByteBpeTokenizer(std::string model_bytes, const std::string& where)
    : bytes_(std::move(model_bytes)), model_(parse_byte_bpe_model(bytes_, where)) {
  const int64_t n = static_cast<int64_t>(model_.tokens.size());
  if (model_.eos_id < 0)
    throw DataError(
        "[tokenizer] " + where +
        ": the model names no EOS token, which every document ends with (give tokenizer_config.json "
        "an eos_token)");
  info_.name = kByteBpeTokenizer;
  info_.vocab_size = n;
  info_.eos_id = model_.eos_id;
  // Documents start with BOS; a model without one (GPT-2) starts them with EOS, its document separator.
  info_.bos_id = model_.bos_id >= 0 ? model_.bos_id : model_.eos_id;
  // Padding is masked by position, never by id, so sharing EOS's id is harmless.
  info_.pad_id = model_.pad_id >= 0 ? model_.pad_id : model_.eos_id;
  info_.model_sha256 = sha256_hex(bytes_);

  pre_ = std::make_unique<PreTokenizer>(model_.pre_regexes, where);
  vocab_.reserve(model_.tokens.size());
  for (int64_t i = 0; i < n; ++i) vocab_.emplace(model_.tokens[i], static_cast<int32_t>(i));
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(gpt2_byte_char(static_cast<uint8_t>(b)));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_ = std::make_unique<MergeTable>(model_.merges.size());
  for (size_t r = 0; r < model_.merges.size(); ++r) {
    const auto& [left, right] = model_.merges[r];
    // check_byte_bpe_model guarantees all three are tokens.
    merges_->insert(vocab_.at(left), vocab_.at(right), static_cast<int32_t>(r), vocab_.at(left + right));
  }
  cache_ = std::make_unique<WordCache>();
  unknown_bytes_ = model_.unknown_bytes == "unk"         ? UnknownBytes::kUnk
                   : model_.unknown_bytes == "fused-unk" ? UnknownBytes::kFusedUnk
                                                         : UnknownBytes::kDrop;

  id_text_.resize(model_.tokens.size());
  std::vector<uint32_t> code_points;
  for (int64_t i = 0; i < n; ++i) {
    const std::string& text = model_.tokens[i];
    const int32_t type = model_.token_types[i];
    if (i == info_.bos_id || i == info_.eos_id || i == info_.pad_id) continue;
    if (type == kTokenControl || type == kTokenUserDefined) {
      id_text_[i] = text;
      if (!text.empty())
        specials_[static_cast<unsigned char>(text[0])].emplace_back(text, static_cast<int32_t>(i));
      if (text.find('\n') != std::string::npos) specials_with_newline_.push_back(text);
      continue;
    }
    // Text outside the GPT-2 alphabet stands for itself (as HF's ByteLevel decoder does).
    std::string decoded;
    bool mapped = decode_utf8(text, code_points);
    for (uint32_t cp : code_points) {
      const int b = gpt2_char_byte(cp);
      if (b < 0) {
        mapped = false;
        break;
      }
      decoded.push_back(static_cast<char>(b));
    }
    id_text_[i] = mapped ? decoded : text;
  }
  // BOS/EOS/PAD decode to nothing but are still matched where their text is written.
  for (int64_t id : {info_.bos_id, info_.eos_id, info_.pad_id}) {
    const int32_t type = model_.token_types[id];
    const std::string& text = model_.tokens[id];
    if ((type == kTokenControl || type == kTokenUserDefined) && !text.empty()) {
      auto& bucket = specials_[static_cast<unsigned char>(text[0])];
      bool present = false;
      for (const auto& entry : bucket) present = present || entry.second == id;
      if (!present) bucket.emplace_back(text, static_cast<int32_t>(id));
      if (text.find('\n') != std::string::npos) specials_with_newline_.push_back(text);
    }
  }
  for (auto& bucket : specials_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }
  // A prefix space would be added to the right side too; a custom pre-tokenizer has no proven rule.
  const NamedPreTokenizer* named = find_named_pre_tokenizer(model_.pre_tokenizer);
  if (named != nullptr && !model_.add_prefix_space) split_rule_ = named->split_rule;
}

ByteBpeTokenizer::~ByteBpeTokenizer() = default;

std::optional<int64_t> ByteBpeTokenizer::special_token_id(std::string_view text) const {
  const std::optional<int64_t> id = token_id(text);
  if (!id) return std::nullopt;
  const int32_t type = model_.token_types[static_cast<size_t>(*id)];
  if (type != kTokenControl && type != kTokenUserDefined) return std::nullopt;
  return id;
}

std::optional<int64_t> ByteBpeTokenizer::token_id(std::string_view text) const {
  auto it = vocab_.find(std::string(text));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> ByteBpeTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  size_t segment = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& bucket = specials_[static_cast<unsigned char>(text[i])];
    const std::pair<std::string, int32_t>* hit = nullptr;
    for (const auto& special : bucket) {
      if (text.compare(i, special.first.size(), special.first) == 0) {
        hit = &special;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    encode_segment(text.substr(segment, i - segment), ids);
    ids.push_back(hit->second);
    i += hit->first.size();
    segment = i;
  }
  encode_segment(text.substr(segment), ids);
  return ids;
}

void ByteBpeTokenizer::encode_segment(std::string_view segment, std::vector<int64_t>& ids) const {
  if (segment.empty()) return;
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  std::string prefixed;
  if (model_.add_prefix_space && segment.front() != ' ') {
    prefixed = " " + std::string(segment);
    segment = prefixed;
  }
  pre_->split(segment, pieces);
  for (std::string_view piece : pieces) encode_word(piece, ids);
}

void ByteBpeTokenizer::encode_word(std::string_view word, std::vector<int64_t>& ids) const {
  const size_t hash = std::hash<std::string_view>()(word);
  WordCache::Shard& shard = cache_->shards[hash % WordCache::kShards];
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.words.find(key);
    if (it != shard.words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  merge_word(word, symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.words.size() >= WordCache::kShardEntries) shard.words.clear();
  shard.words.emplace(std::move(key), std::move(symbols));
}

void ByteBpeTokenizer::merge_word(std::string_view word, std::vector<int32_t>& symbols) const {
  symbols.clear();
  if (model_.ignore_merges) {
    std::string mapped;
    for (char c : word) mapped += gpt2_byte_char(static_cast<uint8_t>(c));
    auto it = vocab_.find(mapped);
    if (it != vocab_.end()) {
      symbols.push_back(it->second);
      return;
    }
  }
  bool last_unknown = false;
  for (char c : word) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      symbols.push_back(id);
      last_unknown = false;
      continue;
    }
    // A byte without a token, as the model's source treats it (ByteBpeModel::unknown_bytes).
    if (unknown_bytes_ == UnknownBytes::kDrop ||
        (unknown_bytes_ == UnknownBytes::kFusedUnk && last_unknown)) {
      last_unknown = true;
      continue;
    }
    symbols.push_back(static_cast<int32_t>(model_.unk_id));
    last_unknown = true;
  }
  const size_t n = symbols.size();
  if (n < 2) return;
  if (n <= 64) {
    // Short words: scan for the lowest-rank pair each time (leftmost among equals).
    while (symbols.size() > 1) {
      int32_t best_rank = INT32_MAX;
      size_t best = 0;
      int32_t best_id = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const MergeTable::Slot* slot = merges_->find(symbols[i], symbols[i + 1]);
        if (slot != nullptr && slot->rank < best_rank) {
          best_rank = slot->rank;
          best = i;
          best_id = slot->id;
        }
      }
      if (best_rank == INT32_MAX) break;
      symbols[best] = best_id;
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    return;
  }
  // Long words: a heap of candidate pairs over a linked list, stale entries skipped when popped; the order
  // (rank, then position) is the scan's.
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t left_id;
    int32_t right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<int32_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    prev[i] = static_cast<int32_t>(i) - 1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    const MergeTable::Slot* slot = merges_->find(symbols[left], symbols[next[left]]);
    if (slot != nullptr) heap.push({slot->rank, left, symbols[left], symbols[next[left]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int32_t right = next[c.left];
    if (symbols[c.left] != c.left_id || right < 0 || symbols[right] != c.right_id) continue;
    symbols[c.left] = merges_->find(c.left_id, c.right_id)->id;
    symbols[right] = -1;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    push(prev[c.left]);
    push(c.left);
  }
  size_t kept = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) symbols[kept++] = symbols[i];
  symbols.resize(kept);
}

std::string ByteBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (int64_t id : ids) {
    if (id >= 0 && id < static_cast<int64_t>(id_text_.size())) text += id_text_[static_cast<size_t>(id)];
  }
  return text;
}

bool ByteBpeTokenizer::cuts_added_token(std::string_view text, size_t p) const {
  for (const std::string& special : specials_with_newline_) {
    for (size_t k = 0; k + 1 < special.size(); ++k) {
      // The occurrence that would put special[k] at text[p - 1], compared as far as the text goes.
      if (special[k] != '\n' || k + 1 > p) continue;
      const size_t start = p - 1 - k;
      const size_t available = std::min(special.size(), text.size() - start);
      if (text.compare(start, available, special, 0, available) == 0) return true;
    }
  }
  return false;
}

size_t ByteBpeTokenizer::split_point(std::string_view text) const {
  for (size_t p = text.size() - (text.empty() ? 0 : 1); split_rule_ != SplitRule::kNone && p >= 2; --p) {
    if (text[p - 1] != '\n') continue;
    bool cut = false;
    if (split_rule_ == SplitRule::kAfterLineBreaks) {
      cut = is_ascii_letter(text[p]);
    } else {
      cut = (is_ascii_letter(text[p]) && is_printable_ascii_nonspace(text[p - 2])) ||
            (text[p] == '\n' && p + 1 < text.size() && is_ascii_letter(text[p + 1]));
    }
    if (cut && !cuts_added_token(text, p)) return p;
  }
  return split_after_last_line(text);  // no proven place
}

std::unique_ptr<ByteBpeTokenizer> load_byte_bpe(const std::string& path) {
  ByteBpeModel model;
  const bool gguf = path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
  if (gguf) {
    model = byte_bpe_from_gguf(read_gguf_metadata(path), path);
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError("[tokenizer] cannot read '" + path + "'");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Our canonical file (top-level "format") reads back as it is; anything else is an HF tokenizer.json.
    const nlohmann::json json = nlohmann::json::parse(bytes, nullptr, false);
    if (json.is_object() && json.contains("format"))
      return std::make_unique<ByteBpeTokenizer>(std::move(bytes), path);
    model = byte_bpe_from_hf(path);
  }
  return std::make_unique<ByteBpeTokenizer>(byte_bpe_model_bytes(model), path);
}

}  // namespace causal
