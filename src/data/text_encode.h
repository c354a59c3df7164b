// `causal data encode` and `causal data inspect` as library calls: text and JSONL files -> token files, and
// a human-readable summary of a token file. The CLI only parses flags and prints the returned text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/jsonl_documents.h"

namespace causal {

struct EncodeOptions {
  std::vector<std::string> inputs;  // text files, or JSONL files (.jsonl, .jsonl.gz), encoded in this order
  std::string tokenizer = "bytes";  // tokenizer name (make_tokenizer)
  std::string out;                  // training token file (the only one when val_out is empty)
  std::string val_out;              // validation token file; empty = no split
  double val_fraction = 0.0;        // share of documents written to val_out, in (0,1); whole documents only
  std::string doc_separator;        // empty = each input file is one document; escapes \n \t \r \\ decoded
  int64_t memory_cap_bytes = int64_t{512} << 20;  // text and ids in flight at once (>= 1 MiB)
  int64_t threads = 0;                            // encoding threads; 0 = every core
  JsonlFields jsonl;                              // how JSONL lines become documents (format and field names)
  std::string chat_template;    // chat: a family name (chat_family_names) instead of the tokenizer's template
  bool skip_bad_lines = false;  // JSONL: count and report bad lines instead of stopping at the first
  std::function<void(const std::string&)> progress;  // a line now and then on long inputs; may be empty
};

struct EncodeResult {
  std::string summary;              // what encode_text_files returns
  int64_t input_bytes = 0;          // bytes read from the inputs
  int64_t peak_buffered_bytes = 0;  // most text + ids held at once (<= memory_cap_bytes)
  double seconds = 0.0;             // wall time of the encoding pass
  int64_t bad_lines = 0;            // JSONL lines skipped (skip_bad_lines)
  int64_t supervised_labels = 0;    // labels the loss counts, both files together
  int64_t labels = 0;               // all labels (tokens less one BOS per document), both files together
};

// Each document is stored as [BOS, ids of its text..., EOS] with its text's byte count; documents that are
// empty or only whitespace are skipped (they would teach nothing but BOS -> EOS). JSONL inputs give one
// document per line; the prompt-completion and chat formats write a loss mask (token file v3) that leaves
// out the prompt, each segment encoded on its own so that no token straddles prompt and answer, and record
// the supervised text's bytes as the document's. Streams: a first pass
// finds the documents, the second encodes windows of at most memory_cap_bytes of text and ids on every
// thread and writes them in order, so a corpus larger than memory encodes. Deterministic: the same inputs
// and options give byte-identical files, whatever the cap or thread count. Throws DataError (unreadable
// input, bad option, a split that would leave either side without documents, a bad JSONL line naming its
// file, line and field unless skip_bad_lines); nothing is written then.
EncodeResult encode_text(const EncodeOptions& options);
std::string encode_text_files(const EncodeOptions& options);  // encode_text(options).summary

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
