// libFuzzer harness: JSONL lines through `causal data encode --format text|prompt-completion|chat` (ChatML
// and Llama 2, which checks the order of roles). A line parses to a document or names its bad field, and a
// text line is one supervised segment.
#include <string>
#include <variant>

#include "data/chat_template.h"
#include "data/jsonl_documents.h"
#include "fuzz_support.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte chooses the format and the chat family; the rest is the line.
  if (size < 1) return 0;
  JsonlFields fields;
  fields.format = static_cast<JsonlFormat>(data[0] % 3);
  const ChatFormat chat{(data[0] & 4) != 0 ? ChatFamily::kLlama2 : ChatFamily::kChatMl};
  const std::string line(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const auto parsed = parse_jsonl_line(line, fields, &chat);
    if (const auto* error = std::get_if<JsonlLineError>(&parsed)) {
      fuzz::require(!error->field.empty() && !error->problem.empty(),
                    "a bad line names its field and problem");
      return 0;
    }
    const JsonlDocument& doc = std::get<JsonlDocument>(parsed);
    if (fields.format == JsonlFormat::kText && !doc.segments.empty()) {
      fuzz::require(doc.segments.size() == 1 && doc.segments[0].supervised,
                    "a text line is one supervised segment");
    }
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
