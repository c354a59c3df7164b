// Text -> token file encoding and token file inspection.
#include "data/text_encode.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "core/errors.h"
#include "data/token_file.h"
#include "data/tokenizer.h"

namespace causal {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[data encode] cannot read input '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError("[data encode] error while reading input '" + path + "'");
  return text;
}

bool only_whitespace(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

struct EncodedSplit {
  std::vector<int64_t> tokens;
  std::vector<int64_t> starts;
};

void append_document(EncodedSplit& split, const std::vector<int64_t>& ids, const TokenizerInfo& info) {
  split.starts.push_back(static_cast<int64_t>(split.tokens.size()));
  split.tokens.push_back(info.bos_id);
  split.tokens.insert(split.tokens.end(), ids.begin(), ids.end());
  split.tokens.push_back(info.eos_id);
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
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string fixed1(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

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

std::string encode_text_files(const EncodeOptions& options) {
  if (options.inputs.empty()) throw DataError("[data encode] no input files given (--input)");
  if (options.out.empty()) throw DataError("[data encode] no output file given (--out)");
  const bool split = !options.val_out.empty();
  if (split != (options.val_fraction != 0.0)) {
    throw DataError("[data encode] --val-out and --val-fraction go together: give both or neither");
  }
  if (split && options.val_out == options.out) {
    throw DataError("[data encode] --val-out and --out name the same file '" + options.out + "'");
  }
  std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(options.tokenizer);
  const TokenizerInfo& info = tokenizer->info();
  const std::string separator = unescape_separator(options.doc_separator);

  // All documents are tokenized first so the split can see how many there are.
  std::vector<std::vector<int64_t>> documents;
  int64_t input_bytes = 0, skipped = 0;
  for (const std::string& path : options.inputs) {
    const std::string text = read_file(path);
    input_bytes += static_cast<int64_t>(text.size());
    std::vector<std::string> pieces = split_documents(text, separator);
    if (pieces.empty()) ++skipped;
    for (const std::string& piece : pieces) documents.push_back(tokenizer->encode(piece));
  }
  if (documents.empty()) {
    throw DataError("[data encode] the " + std::to_string(options.inputs.size()) +
                    " input file(s) hold no non-empty document");
  }
  const auto count = static_cast<int64_t>(documents.size());
  const std::vector<bool> is_val = split ? choose_validation_documents(count, options.val_fraction)
                                         : std::vector<bool>(documents.size(), false);
  EncodedSplit train, val;
  for (int64_t d = 0; d < count; ++d) append_document(is_val[d] ? val : train, documents[d], info);

  write_token_file(options.out, info, train.tokens, train.starts);
  if (split) write_token_file(options.val_out, info, val.tokens, val.starts);

  std::ostringstream s;
  s << "tokenizer " << info.describe() << "\n";
  s << "read " << options.inputs.size() << " file(s), " << input_bytes << " bytes: " << count
    << " document(s)";
  if (skipped > 0) s << " (" << skipped << " empty file(s) skipped)";
  s << "\n";
  s << "wrote " << options.out << ": " << train.starts.size() << " documents, " << train.tokens.size()
    << " tokens (" << to_string(smallest_dtype(info.vocab_size)) << ")\n";
  if (split) {
    s << "wrote " << options.val_out << ": " << val.starts.size() << " documents, " << val.tokens.size()
      << " tokens (" << to_string(smallest_dtype(info.vocab_size)) << ")\n";
  }
  return s.str();
}

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
  s << "documents   " << n << "\n";
  s << "doc tokens  min " << sorted.front() << ", median " << quantile(0.5) << ", mean " << fixed1(mean)
    << ", p90 " << quantile(0.9) << ", max " << sorted.back() << " (BOS and EOS included)\n";
  // A preview only where this build knows the tokenizer, so unknown ids are never printed as text.
  if (h.tokenizer.name == "bytes" && h.tokenizer == make_tokenizer("bytes")->info()) {
    std::vector<int64_t> first = file.document(0);
    s << "first doc   \"" << preview(make_tokenizer("bytes")->decode(first), 72) << "\"\n";
  }
  return s.str();
}

}  // namespace causal
