// Text -> token file encoding and token file inspection.
#include "data/text_encode.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/errors.h"
#include "core/hex.h"
#include "data/chat_template.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "io/atomic_file.h"

namespace causal {
namespace {

bool only_whitespace(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

// Up to `max_chars` of a document's text with control bytes escaped, for a one-line preview.
std::string preview(const std::string& text, size_t max_chars) {
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x" + to_hex(&c, 1);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string fixed1(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

std::string unescape_separator(const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < separator.size(); ++i) {
    if (separator[i] != '\\') {
      out += separator[i];
      continue;
    }
    if (i + 1 == separator.size()) {
      throw DataError("[data encode] --doc-separator ends in a lone backslash; write \\\\ for a backslash");
    }
    switch (separator[++i]) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      default:
        throw DataError(std::string("[data encode] --doc-separator: unknown escape \\") + separator[i] +
                        " (known: \\n \\t \\r \\\\)");
    }
  }
  return out;
}

std::vector<std::string> split_documents(const std::string& text, const std::string& separator) {
  std::vector<std::string> pieces;
  auto keep = [&](std::string piece) {
    if (!only_whitespace(piece)) pieces.push_back(std::move(piece));
  };
  if (separator.empty()) {
    keep(text);
    return pieces;
  }
  size_t begin = 0;
  while (true) {
    const size_t hit = text.find(separator, begin);
    if (hit == std::string::npos) break;
    keep(text.substr(begin, hit - begin));
    begin = hit + separator.size();
  }
  keep(text.substr(begin));
  return pieces;
}

std::vector<bool> choose_validation_documents(int64_t count, double fraction) {
  if (!(fraction > 0.0 && fraction < 1.0)) {
    throw DataError("[data encode] --val-fraction must be in (0, 1), got " + std::to_string(fraction));
  }
  const int64_t k = std::max<int64_t>(1, std::llround(fraction * static_cast<double>(count)));
  if (count - k < 1) {
    throw DataError(
        "[data encode] --val-fraction " + std::to_string(fraction) + " of " + std::to_string(count) +
        " document(s) leaves no training document; the split is by whole documents, so give more " +
        "documents (e.g. --doc-separator) or a smaller fraction");
  }
  std::vector<bool> val(count, false);
  for (int64_t i = 0; i < k; ++i) {
    // (i + 0.5) * count / k in integers: distinct for distinct i because count >= k.
    val[((2 * i + 1) * count) / (2 * k)] = true;
  }
  return val;
}

namespace {

// Where a document lies in the inputs: found by the first pass, read again by the second. A JSONL
// document is the line numbered `offset` (from 1) whose text segments hold `length` bytes.
struct DocSpan {
  size_t file = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

bool any_content(const std::string& text, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i])) == 0) return true;
  }
  return false;
}

// First pass over one input: the documents it holds (split at `separator`, kept byte for byte; empty or
// whitespace-only ones left out), reading `block` bytes at a time.
void scan_documents(const std::vector<std::string>& inputs, size_t file, const std::string& separator,
                    size_t block, std::vector<DocSpan>& spans, int64_t& input_bytes) {
  std::ifstream in(inputs[file], std::ios::binary);
  if (!in) throw DataError("[data encode] cannot read input '" + inputs[file] + "'");
  std::string buf;  // input bytes from file offset `pos` on
  uint64_t pos = 0, doc_begin = 0;
  bool content = false;
  std::string chunk(block, '\0');
  auto close_document = [&](uint64_t end) {
    if (content) spans.push_back({file, doc_begin, end - doc_begin});
    content = false;
  };
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    input_bytes += static_cast<int64_t>(got);
    buf.append(chunk.data(), got);
    size_t from = 0;
    if (!separator.empty()) {
      for (size_t hit; (hit = buf.find(separator, from)) != std::string::npos;) {
        content = content || any_content(buf, from, hit);
        close_document(pos + hit);
        doc_begin = pos + hit + separator.size();
        from = hit + separator.size();
      }
    }
    // A separator may straddle blocks: keep its possible start for the next round.
    const size_t keep = separator.empty() ? 0 : std::min(buf.size() - from, separator.size() - 1);
    content = content || any_content(buf, from, buf.size() - keep);
    pos += buf.size() - keep;
    buf.erase(0, buf.size() - keep);
  }
  if (in.bad()) throw DataError("[data encode] error while reading input '" + inputs[file] + "'");
  content = content || any_content(buf, 0, buf.size());
  close_document(pos + buf.size());
}

// One piece of a document's text, encoded by some thread of the pool.
struct Chunk {
  size_t doc = 0;          // index into the kept documents
  bool first = false;      // begins its document
  bool last = false;       // ends its document
  bool supervised = true;  // the loss counts its ids (a mask is written only for JSONL instruction formats)
  std::string text;
  std::vector<int64_t> ids;
};

// Encodes chunks[i] for every i on `threads` threads; the first error is rethrown after all joined.
void encode_chunks(const Tokenizer& tokenizer, std::vector<Chunk>& chunks, int64_t threads) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();) {
      try {
        chunks[i].ids = tokenizer.encode(chunks[i].text);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  const auto n = static_cast<size_t>(std::min<int64_t>(threads, static_cast<int64_t>(chunks.size())));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

std::string megabytes(double bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

void check_encode_options(const EncodeOptions& options) {
  if (options.inputs.empty()) throw DataError("[data encode] no input files given (--input)");
  if (options.out.empty()) throw DataError("[data encode] no output file given (--out)");
  const bool split = !options.val_out.empty();
  if (split != (options.val_fraction != 0.0)) {
    throw DataError("[data encode] --val-out and --val-fraction go together: give both or neither");
  }
  if (split && options.val_out == options.out) {
    throw DataError("[data encode] --val-out and --out name the same file '" + options.out + "'");
  }
  if (options.memory_cap_bytes < (int64_t{1} << 20)) {
    throw DataError("[data encode] --memory-mb must be at least 1 (MiB), got " +
                    std::to_string(options.memory_cap_bytes >> 20));
  }
  const auto jsonl =
      static_cast<size_t>(std::count_if(options.inputs.begin(), options.inputs.end(), is_jsonl_path));
  if (jsonl != 0 && jsonl != options.inputs.size()) {
    throw DataError(
        "[data encode] the inputs mix JSONL (.jsonl, .jsonl.gz) and text files; encode them apart");
  }
  if (jsonl == 0 && options.jsonl.format != JsonlFormat::kText) {
    throw DataError("[data encode] --format " + jsonl_format_name(options.jsonl.format) +
                    " reads JSONL inputs (.jsonl or .jsonl.gz), got '" + options.inputs[0] + "'");
  }
  if (jsonl != 0 && !options.doc_separator.empty()) {
    throw DataError("[data encode] --doc-separator splits text files; a JSONL line is already one document");
  }
  if (jsonl == 0 && options.skip_bad_lines)
    throw DataError("[data encode] --skip-bad-lines applies to JSONL inputs only");
  if (!options.chat_template.empty() && options.jsonl.format != JsonlFormat::kChat)
    throw DataError("[data encode] --chat-template goes with --format chat");
}

// The chat format JSONL conversations are rendered in: the named family, else the tokenizer's template,
// else ChatML (bytes and SentencePiece record none).
ChatFormat encode_chat_format(const EncodeOptions& options, const Tokenizer& tokenizer) {
  if (!options.chat_template.empty()) {
    try {
      return ChatFormat{chat_family_from_name(options.chat_template)};
    } catch (const UsageError& e) {
      throw DataError(std::string("[data encode] --chat-template: ") + e.what());
    }
  }
  if (tokenizer.chat_template().empty()) return ChatFormat{ChatFamily::kChatMl};
  if (std::optional<ChatFormat> format = detect_chat_format(tokenizer.chat_template())) return *format;
  std::string names;
  for (const std::string& name : chat_family_names()) names += (names.empty() ? "" : ", ") + name;
  throw DataError(
      "[data encode] the tokenizer's chat template is not one causal recognises; name the family it "
      "follows with --chat-template (" +
      names + ")");
}

// A chunk of n bytes holds its text and at most n ids of 8 bytes while in flight: 9n bytes.
constexpr int64_t kInFlightPerByte = 1 + static_cast<int64_t>(sizeof(int64_t));

// One `data encode`: the documents found in a first pass over the inputs, then read again in chunks that
// the threads encode a window at a time (at most memory_cap_bytes in flight) and write in document order.
class TextEncoder {
 public:
  explicit TextEncoder(const EncodeOptions& options)
      : options_(options),
        tokenizer_(make_tokenizer(options.tokenizer)),
        split_(!options.val_out.empty()),
        jsonl_(is_jsonl_path(options.inputs[0])),
        masked_(jsonl_ && options.jsonl.format != JsonlFormat::kText),
        threads_(options.threads > 0 ? options.threads
                                     : std::max<int64_t>(1, std::thread::hardware_concurrency())),
        // Small enough for every thread to get a few chunks per window.
        chunk_bytes_(static_cast<size_t>(std::clamp<int64_t>(
            options.memory_cap_bytes / kInFlightPerByte / (4 * threads_), 4096, int64_t{4} << 20))) {
    if (jsonl_ && options.jsonl.format == JsonlFormat::kChat)
      chat_ = encode_chat_format(options, *tokenizer_);
  }

  EncodeResult run() {
    find_documents();
    start_ = last_report_ = std::chrono::steady_clock::now();
    const TokenizerInfo& info = tokenizer_->info();
    const std::string& model = tokenizer_->model_bytes();
    io_as<DataError>([&] {
      write_file_atomically(options_.out, [&](std::ostream& train_out) {
        TokenFileWriter train(train_out, options_.out, info, model, /*document_bytes_known=*/true,
                              std::nullopt, masked_);
        if (!split_) return write_all(train, nullptr);
        write_file_atomically(options_.val_out, [&](std::ostream& val_out) {
          TokenFileWriter val(val_out, options_.val_out, info, model, /*document_bytes_known=*/true,
                              std::nullopt, masked_);
          write_all(train, &val);
        });
      });
    });
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    report(true);
    result_.summary = summary();
    return result_;
  }

 private:
  void find_documents() {
    const std::string separator = unescape_separator(options_.doc_separator);
    for (size_t f = 0; f < options_.inputs.size(); ++f) {
      const size_t before = spans_.size();
      if (jsonl_) {
        scan_jsonl(f);
      } else {
        scan_documents(options_.inputs, f, separator, chunk_bytes_, spans_, result_.input_bytes);
      }
      if (spans_.size() == before) ++skipped_files_;
    }
    if (spans_.empty()) {
      throw DataError("[data encode] the " + std::to_string(options_.inputs.size()) +
                      " input file(s) hold no non-empty document" +
                      (result_.bad_lines > 0 ? " (" + std::to_string(result_.bad_lines) +
                                                   " bad line(s) skipped; the first: " + first_bad_line_ + ")"
                                             : std::string()));
    }
    is_val_ = split_ ? choose_validation_documents(static_cast<int64_t>(spans_.size()), options_.val_fraction)
                     : std::vector<bool>(spans_.size(), false);
    for (const DocSpan& span : spans_) text_bytes_ += static_cast<int64_t>(span.length);
  }

  // The JSONL line `line` of file `f` as a document, or the error that stops the encoding.
  std::optional<JsonlDocument> jsonl_document(size_t f, const LineReader& reader, const std::string& line) {
    auto parsed = parse_jsonl_line(line, options_.jsonl, chat_ ? &*chat_ : nullptr);
    if (auto* doc = std::get_if<JsonlDocument>(&parsed)) return std::move(*doc);
    const JsonlLineError& error = std::get<JsonlLineError>(parsed);
    const std::string where = options_.inputs[f] + ":" + std::to_string(reader.line_number()) + ": " +
                              (error.field == "(line)" ? "the line " : "field '" + error.field + "' ") +
                              error.problem;
    if (!options_.skip_bad_lines) {
      throw DataError("[data encode] " + where + " (" + jsonl_format_name(options_.jsonl.format) +
                      " format); nothing was written (--skip-bad-lines skips such lines)");
    }
    if (result_.bad_lines++ == 0) first_bad_line_ = where;
    return std::nullopt;
  }

  // First pass over a JSONL input: every line parsed (and, for chat, rendered), the documents kept with
  // their supervised bytes and whether their EOS counts.
  void scan_jsonl(size_t f) {
    LineReader reader(options_.inputs[f]);
    std::string line;
    while (reader.next(line)) {
      const std::optional<JsonlDocument> doc = jsonl_document(f, reader, line);
      if (!doc) continue;
      int64_t bytes = 0, supervised_bytes = 0;
      bool any_supervised = doc->eos_supervised;
      for (const DocumentSegment& segment : doc->segments) {
        bytes += static_cast<int64_t>(segment.text.size());
        if (segment.supervised) supervised_bytes += static_cast<int64_t>(segment.text.size());
        any_supervised = any_supervised || (segment.supervised && !segment.text.empty());
      }
      if (doc->segments.empty() || !any_supervised) {
        ++(doc->segments.empty() ? empty_lines_ : unsupervised_lines_);
        continue;
      }
      spans_.push_back({f, static_cast<uint64_t>(reader.line_number()), static_cast<uint64_t>(bytes)});
      doc_bytes_.push_back(masked_ ? supervised_bytes : bytes);
      eos_supervised_.push_back(doc->eos_supervised);
    }
    result_.input_bytes += reader.bytes_read();
  }

  // Second pass: the kept documents of JSONL input `f` from `d` on, their segments queued as chunks.
  size_t read_jsonl(size_t f, size_t d, TokenFileWriter& train, TokenFileWriter* val) {
    LineReader reader(options_.inputs[f]);
    std::string line;
    for (; d < spans_.size() && spans_[d].file == f; ++d) {
      do {
        if (!reader.next(line)) {
          throw DataError("[data encode] input '" + options_.inputs[f] +
                          "' changed while it was being encoded (shorter than on the first pass)");
        }
      } while (static_cast<uint64_t>(reader.line_number()) < spans_[d].offset);
      std::optional<JsonlDocument> doc = jsonl_document(f, reader, line);
      if (!doc || doc->segments.empty())
        throw DataError("[data encode] input '" + options_.inputs[f] +
                        "' changed while it was being encoded");
      for (size_t i = 0; i < doc->segments.size(); ++i) {
        Chunk chunk;
        chunk.doc = d;
        chunk.first = i == 0;
        chunk.last = i + 1 == doc->segments.size();
        chunk.supervised = doc->segments[i].supervised;
        chunk.text = std::move(doc->segments[i].text);
        queue(std::move(chunk), train, val);
      }
    }
    return d;
  }

  // Adds a chunk to the window, encoding and writing the window first when it would not fit.
  void queue(Chunk chunk, TokenFileWriter& train, TokenFileWriter* val) {
    const int64_t charge = kInFlightPerByte * static_cast<int64_t>(chunk.text.size());
    if (!window_.empty() && window_charge_ + charge > options_.memory_cap_bytes) flush_window(train, val);
    window_charge_ += charge;
    window_.push_back(std::move(chunk));
  }

  int64_t document_bytes(size_t d) const {
    return jsonl_ ? doc_bytes_[d] : static_cast<int64_t>(spans_[d].length);
  }

  // At most every 2 s, and once at the end.
  void report(bool force) {
    const auto now = std::chrono::steady_clock::now();
    if (!options_.progress || (!force && now - last_report_ < std::chrono::seconds(2))) return;
    last_report_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    options_.progress(fmt::format(
        "[data encode] {} of {} ({:.0f}%), {:.1f} MB/s", megabytes(static_cast<double>(done_bytes_)),
        megabytes(static_cast<double>(text_bytes_)),
        100.0 * static_cast<double>(done_bytes_) / static_cast<double>(std::max<int64_t>(text_bytes_, 1)),
        static_cast<double>(done_bytes_) / 1e6 / std::max(s, 1e-9)));
  }

  // Encodes the window's chunks on the threads, then appends them in order to their files.
  void flush_window(TokenFileWriter& train, TokenFileWriter* val) {
    encode_chunks(*tokenizer_, window_, threads_);
    int64_t held = 0;
    for (const Chunk& c : window_) held += static_cast<int64_t>(c.text.size() + 8 * c.ids.size());
    result_.peak_buffered_bytes = std::max(result_.peak_buffered_bytes, held);
    std::vector<uint8_t> flags;
    for (const Chunk& c : window_) {
      TokenFileWriter& out = is_val_[c.doc] ? *val : train;
      if (c.first) out.begin_document();
      flags.assign(c.ids.size(), c.supervised ? 1 : 0);
      out.append(c.ids.data(), c.ids.size(), flags.data());
      const auto ids = static_cast<int64_t>(c.ids.size());
      result_.labels += ids;
      result_.supervised_labels += c.supervised ? ids : 0;
      if (c.last) {
        const bool eos = !jsonl_ || eos_supervised_[c.doc];
        out.end_document(document_bytes(c.doc), eos);
        result_.labels += 1;
        result_.supervised_labels += eos ? 1 : 0;
      }
      done_bytes_ += static_cast<int64_t>(c.text.size());
    }
    window_.clear();
    window_charge_ = 0;
    report(false);
  }

  // Document `d` read again from its file, cut where the tokenizer allows into chunks of the window.
  void read_document(size_t d, std::ifstream& in, TokenFileWriter& train, TokenFileWriter* val) {
    const DocSpan& span = spans_[d];
    in.seekg(static_cast<std::streamoff>(span.offset));
    uint64_t unread = span.length;
    bool first = true;
    std::string rest;  // text of the document read but not yet in a chunk
    while (unread > 0 || !rest.empty()) {
      const size_t want = std::min<uint64_t>(unread, chunk_bytes_ - std::min(rest.size(), chunk_bytes_));
      if (want > 0) {
        const size_t had = rest.size();
        rest.resize(had + want);
        in.read(rest.data() + had, static_cast<std::streamsize>(want));
        if (static_cast<size_t>(in.gcount()) != want) {
          throw DataError("[data encode] input '" + options_.inputs[span.file] +
                          "' changed while it was being encoded (shorter than on the first pass)");
        }
        unread -= want;
      }
      const size_t cut = unread == 0 ? rest.size() : tokenizer_->split_point(rest);
      Chunk chunk;
      chunk.doc = d;
      chunk.first = first;
      chunk.last = unread == 0 && cut == rest.size();
      chunk.text = rest.substr(0, cut);
      rest.erase(0, cut);
      first = false;
      queue(std::move(chunk), train, val);
    }
  }

  void write_all(TokenFileWriter& train, TokenFileWriter* val) {
    std::ifstream in;
    size_t open_file = options_.inputs.size();
    for (size_t d = 0; jsonl_ && d < spans_.size();) d = read_jsonl(spans_[d].file, d, train, val);
    for (size_t d = 0; !jsonl_ && d < spans_.size(); ++d) {
      if (spans_[d].file != open_file) {
        open_file = spans_[d].file;
        in = std::ifstream(options_.inputs[open_file], std::ios::binary);
        if (!in) throw DataError("[data encode] cannot read input '" + options_.inputs[open_file] + "'");
      }
      read_document(d, in, train, val);
    }
    flush_window(train, val);
    train.finish();
    if (val != nullptr) val->finish();
    train_docs_ = train.documents(), train_tokens_ = train.tokens();
    if (val != nullptr) val_docs_ = val->documents(), val_tokens_ = val->tokens();
  }

  std::string summary() const {
    const TokenizerInfo& info = tokenizer_->info();
    const auto count = static_cast<int64_t>(spans_.size());
    std::ostringstream s;
    s << "tokenizer " << info.describe() << "\n";
    if (jsonl_) {
      s << "format " << jsonl_format_name(options_.jsonl.format);
      if (chat_) s << " (chat template " << chat_family_name(chat_->family) << ")";
      s << (masked_ ? ", with a loss mask: the prompt does not count in the loss\n" : "\n");
    }
    s << "read " << options_.inputs.size() << " file(s), " << result_.input_bytes << " bytes: " << count
      << " document(s)";
    if (skipped_files_ > 0) s << " (" << skipped_files_ << " empty file(s) skipped)";
    s << "\n";
    if (empty_lines_ > 0) s << "skipped " << empty_lines_ << " blank line(s) or empty document(s)\n";
    if (unsupervised_lines_ > 0)
      s << "skipped " << unsupervised_lines_
        << " conversation(s) with no assistant turn (nothing to learn)\n";
    if (result_.bad_lines > 0)
      s << "skipped " << result_.bad_lines
        << " bad line(s) (--skip-bad-lines); the first: " << first_bad_line_ << "\n";
    if (masked_) {
      s << fmt::format("supervised {} of {} labels ({:.1f}%)\n", result_.supervised_labels, result_.labels,
                       100.0 * static_cast<double>(result_.supervised_labels) /
                           static_cast<double>(std::max<int64_t>(result_.labels, 1)));
    }
    const std::string width = to_string(smallest_dtype(info.vocab_size));
    s << "wrote " << options_.out << ": " << train_docs_ << " documents, " << train_tokens_ << " tokens ("
      << width << ")\n";
    if (split_) {
      s << "wrote " << options_.val_out << ": " << val_docs_ << " documents, " << val_tokens_ << " tokens ("
        << width << ")\n";
    }
    s << fmt::format("encoded {} in {:.2f} s ({:.1f} MB/s, {} threads), {:.3f} bytes per token\n",
                     megabytes(static_cast<double>(text_bytes_)), result_.seconds,
                     static_cast<double>(text_bytes_) / 1e6 / std::max(result_.seconds, 1e-9), threads_,
                     static_cast<double>(text_bytes_) /
                         static_cast<double>(std::max<int64_t>(train_tokens_ + val_tokens_ - 2 * count, 1)));
    return s.str();
  }

  const EncodeOptions& options_;
  const std::unique_ptr<Tokenizer> tokenizer_;
  const bool split_;
  const bool jsonl_;   // the inputs are JSONL
  const bool masked_;  // ... in a format that writes a loss mask
  const int64_t threads_;
  const size_t chunk_bytes_;

  EncodeResult result_;
  std::vector<DocSpan> spans_;
  std::vector<bool> is_val_;
  std::optional<ChatFormat> chat_;
  std::vector<int64_t> doc_bytes_;    // JSONL: bytes each document records (its supervised text's if masked)
  std::vector<bool> eos_supervised_;  // JSONL: whether each document's EOS counts
  int64_t empty_lines_ = 0, unsupervised_lines_ = 0;
  std::string first_bad_line_;
  int64_t skipped_files_ = 0;
  int64_t text_bytes_ = 0, done_bytes_ = 0;
  std::chrono::steady_clock::time_point start_, last_report_;
  std::vector<Chunk> window_;
  int64_t window_charge_ = 0;
  int64_t train_docs_ = 0, val_docs_ = 0, train_tokens_ = 0, val_tokens_ = 0;
};

}  // namespace

EncodeResult encode_text(const EncodeOptions& options) {
  check_encode_options(options);
  return TextEncoder(options).run();
}

std::string encode_text_files(const EncodeOptions& options) { return encode_text(options).summary; }

std::string inspect_token_file(const std::string& path) {
  const TokenFile file(path);
  const TokenFileHeader& h = file.header();
  std::vector<int64_t> lengths(file.num_documents());
  for (int64_t d = 0; d < file.num_documents(); ++d) lengths[d] = file.document_length(d);
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  const auto n = static_cast<int64_t>(sorted.size());
  auto quantile = [&](double q) { return sorted[std::min<int64_t>(n - 1, static_cast<int64_t>(q * n))]; };
  const double mean = static_cast<double>(h.token_count) / static_cast<double>(n);

  std::ostringstream s;
  s << "file        " << path << " (" << h.file_bytes() << " bytes)\n";
  s << "format      causal token file v" << h.version << ", " << to_string(h.dtype) << " ids\n";
  s << "tokenizer   " << h.tokenizer.describe() << "\n";
  s << "tokens      " << h.token_count << " (" << h.token_count - n << " (input, label) pairs)\n";
  if (h.loss_mask) {
    s << fmt::format("supervised  {} of {} labels ({:.1f}%) count in the loss (loss mask)\n",
                     file.supervised_labels(), h.token_count - n,
                     100.0 * static_cast<double>(file.supervised_labels()) /
                         static_cast<double>(std::max<int64_t>(h.token_count - n, 1)));
  }
  s << "documents   " << n << "\n";
  s << "doc tokens  min " << sorted.front() << ", median " << quantile(0.5) << ", mean " << fixed1(mean)
    << ", p90 " << quantile(0.9) << ", max " << sorted.back() << " (BOS and EOS included)\n";
  if (h.document_bytes_known) {
    int64_t bytes = 0;
    for (int64_t d = 0; d < n; ++d) bytes += file.document_bytes(d);
    const std::string line = fmt::format(
        " ({:.3f} bytes per token, BOS and EOS excluded)",
        static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(h.token_count - 2 * n, 1)));
    // With a loss mask the counts are the supervised text's: what bits per byte divides by.
    s << "text bytes  " << bytes
      << (h.loss_mask ? " of supervised text (bits per byte divides by them)" : line) << "\n";
  } else {
    s << "text bytes  unknown (ids imported from another trainer: no bits per byte)\n";
  }
  if (h.model_bytes > 0) s << "model       " << h.model_bytes << " bytes embedded\n";
  // A preview only where the tokenizer is known, so unknown ids are never printed as text.
  if (const auto tokenizer = tokenizer_for(h.tokenizer, file.tokenizer_model())) {
    s << "first doc   \"" << preview(tokenizer->decode(file.document(0)), 72) << "\"\n";
  }
  return s.str();
}

}  // namespace causal
