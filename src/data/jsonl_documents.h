// JSONL corpora as documents for `causal data encode`: one JSON object per line, read from `.jsonl` or
// `.jsonl.gz` files, turned into the pieces of text a document is made of and whether the loss counts them
// (an instruction's prompt does not; its answer does). docs/data.md describes the three formats.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "data/chat_template.h"

namespace causal {

enum class JsonlFormat {
  kText,              // {"text": ...}: the whole document is supervised
  kPromptCompletion,  // {"prompt": ..., "completion": ...}: the completion is
  kChat,              // {"messages": [{"role", "content"}, ...]}: the assistant's turns are
};
JsonlFormat jsonl_format_from_name(const std::string& name);  // "text" | "prompt-completion" | "chat"
std::string jsonl_format_name(JsonlFormat format);

struct JsonlFields {
  JsonlFormat format = JsonlFormat::kText;
  std::string text = "text";              // kText
  std::string prompt = "prompt";          // kPromptCompletion
  std::string completion = "completion";  // kPromptCompletion
};

// A run of a document's text; concatenated, the segments are the document.
struct DocumentSegment {
  std::string text;
  bool supervised = true;
};

struct JsonlDocument {
  std::vector<DocumentSegment> segments;  // empty: nothing to encode (blank line, empty or blank text)
  bool eos_supervised = true;             // chat: only when the conversation ends with the assistant
};

// What is wrong with one line: the field (e.g. "messages[2].role") and the problem.
struct JsonlLineError {
  std::string field;
  std::string problem;
};

// Whether a file name says JSONL: it ends in ".jsonl" or ".jsonl.gz".
bool is_jsonl_path(const std::string& path);

// One line of a JSONL file as a document in `fields.format` (`chat` renders the messages through `chat`,
// which kChat requires). A line that is blank gives an empty document. Returns the error instead for a line
// that is not a JSON object, lacks a field or holds the wrong type, names an unknown role, or whose
// conversation the chat family refuses.
std::variant<JsonlDocument, JsonlLineError> parse_jsonl_line(std::string_view line, const JsonlFields& fields,
                                                             const ChatFormat* chat);

// Reads a text file line by line, gzip-compressed or not (zlib reads plain files as they are), with lines
// of any length. Lines lose their "\n" (and a "\r" before it).
class LineReader {
 public:
  explicit LineReader(const std::string& path);  // throws DataError naming the file when it cannot open
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  bool next(std::string& line);                         // false at the end; throws DataError on a read error
  int64_t line_number() const { return line_number_; }  // of the line next() returned, from 1
  int64_t bytes_read() const { return bytes_read_; }    // uncompressed bytes consumed so far

 private:
  bool fill();

  std::string path_;
  void* file_ = nullptr;  // gzFile
  std::string buffer_;
  size_t begin_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t bytes_read_ = 0;
};

}  // namespace causal
