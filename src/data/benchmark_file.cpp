// Benchmark JSONL: each line's layout found from its fields, every problem reported with file and line.
#include "data/benchmark_file.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "data/benchmark_text.h"

namespace causal {
namespace {

using nlohmann::json;

// A value for a message, on one line and cut short: `string "abc"`, `integer 5`, `array [1,2]`.
std::string describe(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return std::string(value.type_name()) + " " + text;
}

class LineFields {
 public:
  LineFields(const std::string& path, int64_t line, const json& row) : path_(path), line_(line), row_(row) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw DataError("[benchmark] " + path_ + ":" + std::to_string(line_) +
                    (field.empty() ? "" : ": field '" + field + "'") + ": " + problem);
  }

  bool has(const char* field) const { return row_.contains(field); }

  std::string text(const char* field) const {
    const auto it = row_.find(field);
    if (it == row_.end()) fail(field, "missing");
    if (!it->is_string()) fail(field, "expected a string, got " + describe(*it));
    return it->get<std::string>();
  }

  std::vector<std::string> texts(const char* field) const {
    const auto it = row_.find(field);
    if (it == row_.end()) fail(field, "missing");
    if (!it->is_array() || it->size() < 2)
      fail(field, "expected a list of at least 2 strings, got " + describe(*it));
    std::vector<std::string> out;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& entry = (*it)[i];
      if (!entry.is_string())
        fail(field, "entry " + std::to_string(i) + ": expected a string, got " + describe(entry));
      out.push_back(entry.get<std::string>());
    }
    return out;
  }

  // An index into `count` choices: an integer, or (`string_allowed`, HellaSwag's files) a string holding one.
  int64_t index(const char* field, size_t count, bool string_allowed) const {
    const auto it = row_.find(field);
    if (it == row_.end()) fail(field, "missing");
    int64_t value = -1;
    if (it->is_number_integer()) {
      value = it->get<int64_t>();
    } else if (string_allowed && it->is_string() && !it->get<std::string>().empty() &&
               it->get<std::string>().find_first_not_of("0123456789") == std::string::npos &&
               it->get<std::string>().size() < 10) {
      value = std::stoll(it->get<std::string>());
    } else {
      fail(field, std::string("expected an integer") + (string_allowed ? " (or a string holding one)" : "") +
                      ", got " + describe(*it));
    }
    if (value < 0 || value >= static_cast<int64_t>(count)) {
      fail(field, std::to_string(value) + " is not a choice: expected 0.." + std::to_string(count - 1));
    }
    return value;
  }

  void check_choices(const char* field, const std::vector<std::string>& choices) const {
    for (size_t i = 0; i < choices.size(); ++i) {
      // acc_norm divides by a choice's length: an empty one has none.
      if (choices[i].empty()) fail(field, "entry " + std::to_string(i) + " is empty");
    }
  }

 private:
  const std::string& path_;
  int64_t line_;
  const json& row_;
};

BenchmarkItem hellaswag_item(const LineFields& in) {
  BenchmarkItem item;
  // The published files carry the parts lm-eval joins; a file with "ctx" alone is cleaned as given.
  if (in.has("activity_label") && in.has("ctx_a") && in.has("ctx_b")) {
    item.context = hellaswag_query(in.text("activity_label"), in.text("ctx_a"), in.text("ctx_b"));
  } else {
    item.context = hellaswag_preprocess(in.text("ctx"));
  }
  for (const std::string& ending : in.texts("endings")) item.choices.push_back(hellaswag_preprocess(ending));
  in.check_choices("endings", item.choices);
  item.answer = in.index("label", item.choices.size(), /*string_allowed=*/true);
  return item;
}

BenchmarkItem generic_item(const LineFields& in) {
  BenchmarkItem item;
  item.context = in.text("context");
  item.choices = in.texts("choices");
  in.check_choices("choices", item.choices);
  item.answer = in.index("answer", item.choices.size(), /*string_allowed=*/false);
  return item;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r\n") == std::string::npos; }

}  // namespace

std::string benchmark_name(const std::string& path) { return std::filesystem::path(path).stem().string(); }

Benchmark read_benchmark(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[benchmark] cannot open " + path);
  Benchmark benchmark;
  benchmark.name = benchmark_name(path);
  benchmark.path = path;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (blank(text)) continue;
    json row;
    try {
      row = json::parse(text);
    } catch (const json::exception& e) {
      // nlohmann's message without its "[json.exception.parse_error.101] " tag.
      std::string why = e.what();
      if (why.rfind('[', 0) == 0 && why.find("] ") != std::string::npos) why = why.substr(why.find("] ") + 2);
      throw DataError("[benchmark] " + path + ":" + std::to_string(number) + ": not JSON (" + why + ")");
    }
    const LineFields reader(path, number, row);
    if (!row.is_object()) reader.fail("", "expected a JSON object, got " + describe(row));
    const bool hellaswag = row.contains("endings"), generic = row.contains("choices");
    if (hellaswag == generic) {
      reader.fail("", hellaswag
                          ? "has both \"endings\" (HellaSwag) and \"choices\" (generic): one layout a line"
                          : "neither HellaSwag's fields (ctx, endings, label) nor the generic ones "
                            "(context, choices, answer)");
    }
    BenchmarkItem item = hellaswag ? hellaswag_item(reader) : generic_item(reader);
    item.line = number;
    benchmark.items.push_back(std::move(item));
  }
  if (in.bad()) throw DataError("[benchmark] error reading " + path);
  if (benchmark.items.empty())
    throw DataError("[benchmark] " + path + " holds no items (one JSON object a line)");
  return benchmark;
}

}  // namespace causal
