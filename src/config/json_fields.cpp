// Leaf readers and error text for the visitor-based JSON mapping of config structs.
#include "config/json_fields.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace causal::json_fields {
namespace {

constexpr std::size_t kMaxShown = 60;  // longer values are cut in messages to keep them on one line

std::string shorten(std::string text) {
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown - 3) + "...";
  return text;
}

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string index_path(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return std::string("boolean ") + (value.get<bool>() ? "true" : "false");
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer " + dump(value);
    case json::value_t::number_float:
      return "number " + dump(value);  // keeps "64.0", which is why an integer field rejected it
    case json::value_t::string:
      return "string " + shorten(dump(value));
    case json::value_t::array:
      return "array " + shorten(dump(value));
    case json::value_t::object:
      return "object " + shorten(dump(value));
    default:
      return shorten(dump(value));
  }
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = json(value).dump();
  // 1.0 reads as "1" in a range message; the shortest round-trip form is kept otherwise.
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

std::string exception_text(const json::exception& e) {
  std::string text = e.what();
  if (!text.empty() && text[0] == '[') {
    const std::size_t close = text.find("] ");
    if (close != std::string::npos) text = text.substr(close + 2);
  }
  return text;
}

void throw_type_error(const std::string& source, const std::string& path, const std::string& expected,
                      const json& got) {
  throw ConfigError(source, path, "expected " + expected + ", got " + describe(got));
}

void read_leaf(const json& j, int64_t& out, const std::string& source, const std::string& path) {
  // 3.0 is rejected too: a count written as a float is usually a sign of a different mistake.
  if (!j.is_number_integer()) throw_type_error(source, path, "an integer", j);
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw_type_error(source, path, "an integer that fits in int64", j);
  }
  out = j.get<int64_t>();
}

void read_leaf(const json& j, double& out, const std::string& source, const std::string& path) {
  if (!j.is_number()) throw_type_error(source, path, "a number", j);
  out = j.get<double>();
}

void read_leaf(const json& j, bool& out, const std::string& source, const std::string& path) {
  if (!j.is_boolean()) throw_type_error(source, path, "a boolean (true or false)", j);
  out = j.get<bool>();
}

void read_leaf(const json& j, std::string& out, const std::string& source, const std::string& path) {
  if (!j.is_string()) throw_type_error(source, path, "a string", j);
  out = j.get<std::string>();
}

KeysElsewhere keys_elsewhere(const DataConfig& data) {
  DataConfig here = data;
  const json valid_here = write_value<json>(here);
  KeysElsewhere out;
  for (const auto& [kind, name] : enum_table<DataKind>()) {
    if (kind == data.kind) continue;
    DataConfig other;
    other.kind = kind;
    const json fields = write_value<json>(other);
    for (const auto& item : fields.items()) {
      if (valid_here.contains(item.key())) continue;
      out.emplace_back(item.key(), "belongs to data.kind \"" + std::string(name) + "\", but data.kind is \"" +
                                       to_string(data.kind) + "\"");
    }
  }
  return out;
}

namespace {

// Parent path of every leaf and section, keyed by its own name; arrays of objects appear as "inputs[]".
void collect_paths(const json& j, const std::string& path,
                   std::map<std::string, std::set<std::string>>& out) {
  for (const auto& item : j.items()) {
    const std::string child = join_path(path, item.key());
    out[item.key()].insert(child);
    if (item.value().is_object()) collect_paths(item.value(), child, out);
    if (item.value().is_array() && !item.value().empty() && item.value()[0].is_object()) {
      collect_paths(item.value()[0], child + "[]", out);
    }
  }
}

}  // namespace

std::vector<std::string> field_paths_named(const std::string& key) {
  static const std::map<std::string, std::set<std::string>> paths = [] {
    std::map<std::string, std::set<std::string>> out;
    for (const auto& entry : enum_table<DataKind>()) {
      RunConfig config;
      config.data.kind = entry.first;
      collect_paths(write_value<json>(config), "", out);
    }
    return out;
  }();
  const auto it = paths.find(key);
  if (it == paths.end()) return {};
  return {it->second.begin(), it->second.end()};
}

}  // namespace causal::json_fields
