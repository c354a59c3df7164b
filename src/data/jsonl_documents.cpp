// JSONL lines -> documents of supervised and unsupervised segments, and a gzip-aware line reader.
#include "data/jsonl_documents.h"

#include <zlib.h>

#include <cctype>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace causal {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_blank(std::string_view s) {
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

// The string at `key` of `object`, or the error naming `where`.
std::variant<std::string, JsonlLineError> string_field(const nlohmann::json& object, const std::string& key,
                                                       const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) return JsonlLineError{where, "missing"};
  if (!it->is_string())
    return JsonlLineError{where, std::string("is ") + it->type_name() + ", expected a string"};
  return it->get<std::string>();
}

std::variant<JsonlDocument, JsonlLineError> chat_document(const nlohmann::json& object,
                                                          const ChatFormat& chat) {
  const auto it = object.find("messages");
  if (it == object.end()) return JsonlLineError{"messages", "missing"};
  if (!it->is_array() || it->empty())
    return JsonlLineError{"messages", "expected a non-empty array of {\"role\", \"content\"} objects"};
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      return JsonlLineError{where, std::string("is ") + m.type_name() + ", expected an object"};
    auto role = string_field(m, "role", where + ".role");
    if (auto* error = std::get_if<JsonlLineError>(&role)) return *error;
    auto content = string_field(m, "content", where + ".content");
    if (auto* error = std::get_if<JsonlLineError>(&content)) return *error;
    const std::string& r = std::get<std::string>(role);
    if (r != "system" && r != "user" && r != "assistant")
      return JsonlLineError{where + ".role", "unknown role '" + r + "' (expected system, user or assistant)"};
    messages.push_back({r, std::get<std::string>(content)});
  }
  JsonlDocument doc;
  try {
    for (ChatSpan& span : render_chat_spans(chat, messages, /*add_generation_prompt=*/false, /*bos_text=*/""))
      doc.segments.push_back({std::move(span.text), span.supervised});
  } catch (const UsageError& e) {
    return JsonlLineError{"messages", e.what()};
  }
  // The document's BOS comes from the token file; its EOS is learned only after the assistant's last word.
  doc.eos_supervised = messages.back().role == "assistant";
  return doc;
}

}  // namespace

JsonlFormat jsonl_format_from_name(const std::string& name) {
  if (name == "text") return JsonlFormat::kText;
  if (name == "prompt-completion") return JsonlFormat::kPromptCompletion;
  if (name == "chat") return JsonlFormat::kChat;
  throw UsageError("unknown JSONL format '" + name + "'; expected text, prompt-completion or chat");
}

std::string jsonl_format_name(JsonlFormat format) {
  switch (format) {
    case JsonlFormat::kText:
      return "text";
    case JsonlFormat::kPromptCompletion:
      return "prompt-completion";
    case JsonlFormat::kChat:
      return "chat";
  }
  return "?";
}

bool is_jsonl_path(const std::string& path) {
  return ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz");
}

std::variant<JsonlDocument, JsonlLineError> parse_jsonl_line(std::string_view line, const JsonlFields& fields,
                                                             const ChatFormat* chat) {
  if (is_blank(line)) return JsonlDocument{};
  nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return JsonlLineError{"(line)", "not valid JSON"};
  if (!object.is_object())
    return JsonlLineError{"(line)", std::string("is a JSON ") + object.type_name() + ", expected an object"};
  JsonlDocument doc;
  switch (fields.format) {
    case JsonlFormat::kText: {
      auto text = string_field(object, fields.text, fields.text);
      if (auto* error = std::get_if<JsonlLineError>(&text)) return *error;
      if (!is_blank(std::get<std::string>(text))) doc.segments.push_back({std::get<std::string>(text), true});
      return doc;
    }
    case JsonlFormat::kPromptCompletion: {
      auto prompt = string_field(object, fields.prompt, fields.prompt);
      if (auto* error = std::get_if<JsonlLineError>(&prompt)) return *error;
      auto completion = string_field(object, fields.completion, fields.completion);
      if (auto* error = std::get_if<JsonlLineError>(&completion)) return *error;
      // Taken verbatim: whatever separates the two is the data's choice, as in TRL's prompt-completion sets.
      if (!std::get<std::string>(prompt).empty())
        doc.segments.push_back({std::get<std::string>(prompt), false});
      if (!std::get<std::string>(completion).empty())
        doc.segments.push_back({std::get<std::string>(completion), true});
      return doc;
    }
    case JsonlFormat::kChat:
      return chat_document(object, *chat);
  }
  return doc;
}

LineReader::LineReader(const std::string& path) : path_(path) {
  file_ = gzopen(path.c_str(), "rb");
  if (file_ == nullptr) throw DataError("[data encode] cannot read input '" + path + "'");
  gzbuffer(static_cast<gzFile>(file_), 1 << 20);
}

LineReader::~LineReader() {
  if (file_ != nullptr) gzclose(static_cast<gzFile>(file_));
}

bool LineReader::fill() {
  if (eof_) return false;
  buffer_.erase(0, begin_);
  begin_ = 0;
  const size_t had = buffer_.size();
  constexpr size_t kBlock = size_t{1} << 20;
  buffer_.resize(had + kBlock);
  const int got = gzread(static_cast<gzFile>(file_), buffer_.data() + had, static_cast<unsigned>(kBlock));
  if (got < 0) {
    int code = 0;
    const char* message = gzerror(static_cast<gzFile>(file_), &code);
    throw DataError("[data encode] error while reading input '" + path_ + "' after " +
                    std::to_string(bytes_read_) + " bytes: " + (message != nullptr ? message : "zlib error"));
  }
  buffer_.resize(had + static_cast<size_t>(got));
  bytes_read_ += got;
  if (got == 0) eof_ = true;
  return got > 0;
}

bool LineReader::next(std::string& line) {
  size_t scanned = begin_;
  while (true) {
    const size_t newline = buffer_.find('\n', scanned);
    if (newline != std::string::npos) {
      size_t end = newline;
      if (end > begin_ && buffer_[end - 1] == '\r') --end;
      line.assign(buffer_, begin_, end - begin_);
      begin_ = newline + 1;
      ++line_number_;
      return true;
    }
    scanned = buffer_.size() - begin_;
    if (!fill()) break;
  }
  if (begin_ == buffer_.size()) return false;
  line.assign(buffer_, begin_, std::string::npos);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  begin_ = buffer_.size();
  ++line_number_;
  return true;
}

}  // namespace causal
