// SentencePiece models: loading, exact-bytes encoding and decoding, and training.
#include "data/sentencepiece_tokenizer.h"

#include <spdlog/fmt/fmt.h>

#include <exception>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/errors.h"
#include "data/sentencepiece_backend.h"
#include "data/text_encode.h"
#include "io/atomic_file.h"
#include "io/sha256.h"

namespace causal {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// Length of the valid UTF-8 character at text[i] (1..4), or 0 for a byte that does not start one.
size_t utf8_length(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  size_t n = 0;
  uint32_t min = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  uint32_t code = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(text[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    code = (code << 6) | (cc & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

// Bytes SentencePiece must not see: they are not valid UTF-8 (it would replace them with U+FFFD), or it
// would change them (NUL ends strings, U+2581 decodes as a space, newlines separate training sentences).
size_t direct_byte_run(std::string_view text, size_t i) {
  if (text[i] == '\n' || text[i] == '\0') return 1;
  const size_t n = utf8_length(text, i);
  if (n == 0) return 1;
  if (text.compare(i, n, kSpace) == 0) return n;
  return 0;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::string model, const std::string& where)
    : model_(std::move(model)), processor_(make_sentencepiece_backend()) {
  if (const std::string error = processor_->load(model_); !error.empty()) {
    throw DataError("[tokenizer] " + where + ": not a SentencePiece model (" + error + ")");
  }
  const int64_t vocab = processor_->piece_size();
  info_.name = kSentencePieceTokenizer;
  info_.vocab_size = vocab;
  info_.bos_id = processor_->bos_id();
  info_.eos_id = processor_->eos_id();
  // PAD is never attended to nor a label, so a model without one can pad with EOS.
  info_.pad_id = processor_->pad_id() >= 0 ? processor_->pad_id() : processor_->eos_id();
  info_.model_sha256 = sha256_hex(model_);
  if (info_.bos_id < 0 || info_.eos_id < 0) {
    throw DataError("[tokenizer] " + where +
                    ": the model has no BOS or EOS id; train it with `causal data tokenizer train`");
  }
  byte_ids_.assign(256, -1);
  id_text_.resize(vocab);
  for (int64_t id = 0; id < vocab; ++id) {
    const int i = static_cast<int>(id);
    const std::string piece = processor_->piece(i);
    if (processor_->is_byte(i)) {
      const unsigned value = static_cast<unsigned>(std::stoul(piece.substr(3, 2), nullptr, 16));
      byte_ids_[value] = id;
      id_text_[id] = std::string(1, static_cast<char>(value));
    } else if (processor_->is_control(i)) {
      id_text_[id].clear();
    } else if (processor_->is_unknown(i)) {
      id_text_[id] = "\xEF\xBF\xBD";  // U+FFFD: visible where a model generates it
    } else {
      std::string text;
      for (size_t at = 0; at < piece.size();) {
        if (piece.compare(at, kSpace.size(), kSpace) == 0) {
          text += ' ';
          at += kSpace.size();
        } else {
          text += piece[at++];
        }
      }
      id_text_[id] = std::move(text);
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_ids_[b] < 0) {
      throw DataError("[tokenizer] " + where + ": the model has no byte piece " +
                      fmt::format("<0x{:02X}>", b) +
                      "; causal needs byte fallback (`causal data tokenizer train` turns it on)");
    }
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int64_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<int> piece_ids;
  size_t i = 0;
  while (i < text.size()) {
    if (const size_t direct = direct_byte_run(text, i); direct > 0) {
      for (size_t k = 0; k < direct; ++k) ids.push_back(byte_ids_[static_cast<unsigned char>(text[i + k])]);
      i += direct;
      continue;
    }
    size_t end = i;
    while (end < text.size() && direct_byte_run(text, end) == 0) end += utf8_length(text, end);
    if (const std::string error = processor_->encode(text.substr(i, end - i), &piece_ids); !error.empty())
      throw DataError("[tokenizer] SentencePiece: " + error);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    i = end;
  }
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (int64_t id : ids) {
    if (id >= 0 && id < info_.vocab_size) text += id_text_[id];
  }
  return text;
}

size_t SentencePieceTokenizer::split_point(std::string_view text) const {
  return split_after_last_line(text);
}

std::vector<std::string> SentencePieceTokenizer::pieces(std::string_view text) const {
  std::vector<std::string> out;
  for (int64_t id : encode(text)) out.push_back(processor_->piece(static_cast<int>(id)));
  return out;
}

std::unique_ptr<SentencePieceTokenizer> load_sentencepiece(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[tokenizer] cannot read tokenizer model '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError("[tokenizer] error while reading tokenizer model '" + path + "'");
  return std::make_unique<SentencePieceTokenizer>(std::move(bytes), path);
}

namespace {

// Feeds the trainer one line at a time from every input, cutting lines longer than the limit (the trainer
// would drop them) and reporting how far it has read.
class LineIterator {
 public:
  // Reads the input files in turn, or only `text` when it is given (the training split's documents).
  LineIterator(const TokenizerTrainOptions& options, std::optional<std::string> text)
      : options_(options), sources_(text ? 1 : options.inputs.size()), text_(std::move(text)) {
    Next();
  }

  bool done() const { return done_; }
  const std::string& value() const { return value_; }

  void Next() {
    const auto limit = static_cast<size_t>(options_.max_sentence_length);
    while (true) {
      if (rest_.size() > 0) {
        size_t cut = std::min(limit, rest_.size());
        // Cut at a character boundary so that no piece is trained on half a character.
        while (cut < rest_.size() && cut > 0 && (static_cast<unsigned char>(rest_[cut]) & 0xC0) == 0x80)
          --cut;
        if (cut == 0) cut = std::min(limit, rest_.size());
        value_ = rest_.substr(0, cut);
        rest_.erase(0, cut);
        ++sentences_;
        return;
      }
      if (!in_ || !std::getline(*in_, rest_)) {
        if (in_ && in_->bad()) {
          throw DataError("[tokenizer train] error while reading " +
                          (text_ ? std::string("the training split") : options_.inputs[file_ - 1]));
        }
        if (file_ == sources_) {
          done_ = true;
          report();
          return;
        }
        if (text_) {
          in_ = std::make_unique<std::istringstream>(*text_);
        } else {
          in_ = std::make_unique<std::ifstream>(options_.inputs[file_], std::ios::binary);
          if (!*in_) throw DataError("[tokenizer train] cannot read input '" + options_.inputs[file_] + "'");
        }
        ++file_;
        rest_.clear();
        continue;
      }
      bytes_ += rest_.size() + 1;
      if (bytes_ >= next_report_) report(), next_report_ += kReportEvery;
    }
  }

 private:
  static constexpr uint64_t kReportEvery = uint64_t{64} << 20;

  void report() const {
    if (!options_.progress) return;
    options_.progress(fmt::format("[tokenizer train] read {:.1f} MB, {} sentences{}",
                                  static_cast<double>(bytes_) / 1e6, sentences_,
                                  done_ ? "; training..." : ""));
  }

  const TokenizerTrainOptions& options_;
  size_t sources_;
  std::optional<std::string> text_;
  std::unique_ptr<std::istream> in_;
  size_t file_ = 0;
  std::string rest_, value_;
  bool done_ = false;
  uint64_t bytes_ = 0, sentences_ = 0, next_report_ = kReportEvery;
};

// With a validation fraction: the training split's documents, one after another on their own lines, chosen
// exactly as `data encode` chooses them. nullopt: every line of every input.
std::optional<std::string> training_split_text(const TokenizerTrainOptions& options) {
  if (options.val_fraction == 0.0) return std::nullopt;
  const std::string separator = unescape_separator(options.doc_separator);
  std::vector<std::string> documents;
  for (const std::string& path : options.inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError("[tokenizer train] cannot read input '" + path + "'");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::string& d : split_documents(text, separator)) documents.push_back(std::move(d));
  }
  const std::vector<bool> is_val =
      choose_validation_documents(static_cast<int64_t>(documents.size()), options.val_fraction);
  std::string out;
  for (size_t d = 0; d < documents.size(); ++d) {
    if (!is_val[d]) out += documents[d] + "\n";
  }
  return out;
}

// The first non-empty line of the inputs, at most 80 bytes, as the sample to segment.
std::string sample_line(const std::vector<std::string>& inputs) {
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    for (std::string line; std::getline(in, line);) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      size_t cut = std::min<size_t>(line.size(), 80);
      while (cut < line.size() && cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
      return line.substr(0, cut);
    }
  }
  return "";
}

}  // namespace

std::string train_tokenizer(const TokenizerTrainOptions& options) {
  if (options.inputs.empty()) throw DataError("[tokenizer train] no input files given (--input)");
  if (options.out.empty()) throw DataError("[tokenizer train] no output file given (--out)");
  // 4 specials + 256 byte pieces come first; a vocab with no room for learned pieces would be bytes.
  if (options.vocab_size < 261) {
    throw DataError("[tokenizer train] --vocab-size " + std::to_string(options.vocab_size) +
                    " leaves no room for learned pieces: the 4 specials and 256 byte pieces take 260 ids; "
                    "give at least 261");
  }
  if (!(options.character_coverage > 0.0 && options.character_coverage <= 1.0)) {
    throw DataError("[tokenizer train] --character-coverage must be in (0, 1], got " +
                    std::to_string(options.character_coverage));
  }
  if (options.max_sentence_length < 16) {
    throw DataError("[tokenizer train] --max-sentence-length must be at least 16 bytes, got " +
                    std::to_string(options.max_sentence_length));
  }
  const int64_t threads =
      options.threads > 0 ? options.threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type == SubwordModel::kBpe ? "bpe" : "unigram"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"max_sentence_length", std::to_string(options.max_sentence_length)},
      {"num_threads", std::to_string(threads)},
      {"bos_id", "0"},
      {"eos_id", "1"},
      {"pad_id", "2"},
      {"unk_id", "3"},
      {"byte_fallback", "true"},
      // Text is never rewritten, so decoding gives back the bytes that were encoded.
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"hard_vocab_limit", "false"},
      {"minloglevel", "1"},
  };
  LineIterator lines(options, training_split_text(options));
  // Errors while reading are kept and rethrown here rather than thrown through the library's frames.
  std::exception_ptr read_error;
  bool first = true;
  auto next = [&](std::string& sentence) {
    try {
      if (!first) lines.Next();
      first = false;
      if (lines.done()) return false;
      sentence = lines.value();
      return true;
    } catch (...) {
      read_error = std::current_exception();
      return false;
    }
  };
  std::string model;
  const std::string error = make_sentencepiece_backend()->train(args, next, &model);
  if (read_error) std::rethrow_exception(read_error);
  if (!error.empty()) throw DataError("[tokenizer train] SentencePiece: " + error);
  const SentencePieceTokenizer tokenizer(model, options.out);
  io_as<DataError>([&] { write_file_atomically(options.out, model); });

  std::ostringstream s;
  s << "wrote " << options.out << ": " << (options.model_type == SubwordModel::kBpe ? "bpe" : "unigram")
    << " tokenizer " << tokenizer.info().describe() << "\n";
  const std::string sample = sample_line(options.inputs);
  s << "sample  \"" << sample << "\"\n";
  s << "pieces ";
  for (const std::string& piece : tokenizer.pieces(sample)) s << " [" << piece << "]";
  s << "\n";
  return s.str();
}

}  // namespace causal
