// `causal data encode` and `causal data inspect` as library calls: text files -> token files, and a
// human-readable summary of a token file. The CLI only parses flags and prints the returned text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace causal {

struct EncodeOptions {
  std::vector<std::string> inputs;  // text files, encoded in this order
  std::string tokenizer = "bytes";  // tokenizer name (make_tokenizer)
  std::string out;                  // training token file (the only one when val_out is empty)
  std::string val_out;              // validation token file; empty = no split
  double val_fraction = 0.0;        // share of documents written to val_out, in (0,1); whole documents only
  std::string doc_separator;        // empty = each input file is one document; escapes \n \t \r \\ decoded
};

// Each document is stored as [BOS, ids of its text..., EOS]; documents that are empty or only whitespace
// are skipped (they would teach nothing but BOS -> EOS). Deterministic: the same inputs and options give
// byte-identical files. Returns a few lines of summary. Throws DataError (unreadable input, bad option,
// a split that would leave either side without documents).
std::string encode_text_files(const EncodeOptions& options);

// Decodes the escapes \n \t \r \\ so a separator can be typed on a command line; other escapes throw
// DataError. Text without backslashes is returned unchanged.
std::string unescape_separator(const std::string& separator);

// Splits text at every occurrence of `separator` (already unescaped; empty = the whole text), keeping the
// pieces byte for byte and dropping those that are empty or only whitespace.
std::vector<std::string> split_documents(const std::string& text, const std::string& separator);

// Which of `count` documents go to validation: round(fraction * count) of them (at least 1), spread evenly
// over the order (document floor((i + 0.5) * count / k) for i < k), so a corpus sorted by genre gives a
// validation set covering every genre. Throws DataError if either side would be empty.
std::vector<bool> choose_validation_documents(int64_t count, double fraction);

// Header, document count and document length statistics of a token file (validated by a full open).
std::string inspect_token_file(const std::string& path);

}  // namespace causal
