// `--set dotted.path=value` overrides, found by walking the same visit_fields() the JSON reader uses.
#include <cctype>
#include <nlohmann/json.hpp>

#include "config/config_io.h"
#include "config/json_fields.h"
#include "config/vocab_auto.h"

namespace causal {
namespace {

using json_fields::index_path;
using json_fields::IsStruct;
using json_fields::IsVector;
using json_fields::join_path;
using nlohmann::json;

// One dotted part: "inputs[1]" -> {"inputs", {1}}.
struct PathPart {
  std::string key;
  std::vector<std::size_t> indices;
};

struct Assignment {
  std::string source;  // "--set model.d_model": how errors name the flag
  std::vector<PathPart> parts;
  std::string text;  // everything after the first '='
};

std::string trim(const std::string& s) {
  std::size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

PathPart parse_part(const std::string& text, const std::string& source) {
  PathPart part;
  const std::size_t bracket = text.find('[');
  part.key = text.substr(0, bracket);
  if (part.key.empty())
    throw ConfigError(source, "", "empty key in the path; expected --set dotted.path=value");
  std::size_t pos = bracket;
  while (pos != std::string::npos && pos < text.size()) {
    const std::size_t close = text.find(']', pos);
    const std::string digits = close == std::string::npos ? "" : text.substr(pos + 1, close - pos - 1);
    const bool numeric =
        !digits.empty() && digits.size() <= 9 && digits.find_first_not_of("0123456789") == std::string::npos;
    if (text[pos] != '[' || !numeric) {
      throw ConfigError(source, "",
                        "malformed index in '" + text + "'; expected key[N] with N a non-negative integer");
    }
    part.indices.push_back(static_cast<std::size_t>(std::stoul(digits)));
    pos = close + 1;
  }
  return part;
}

Assignment parse_assignment(const std::string& assignment) {
  const std::size_t eq = assignment.find('=');
  Assignment a;
  a.source = "--set " + trim(assignment.substr(0, eq));
  if (eq == std::string::npos) {
    throw ConfigError(a.source, "", "expected dotted.path=value (e.g. model.d_model=256), got no '='");
  }
  const std::string path = trim(assignment.substr(0, eq));
  a.text = assignment.substr(eq + 1);
  // A shell passes any bytes, but a config is JSON: a value that config.json (or an error naming it)
  // could never be written with is refused here, where the flag is known (tests/fuzz/fuzz_overrides.cpp).
  try {
    static_cast<void>(json(assignment).dump());
  } catch (const json::type_error&) {
    throw ConfigError(a.source, "",
                      "the assignment is not valid UTF-8; expected UTF-8 text (a config is JSON)");
  }
  std::size_t begin = 0;
  while (true) {
    const std::size_t dot = path.find('.', begin);
    const std::string text = path.substr(begin, dot - begin);
    // "inputs.0" is "inputs[0]": a part of digits indexes the array before it.
    if (!a.parts.empty() && !text.empty() && text.size() <= 9 &&
        text.find_first_not_of("0123456789") == std::string::npos) {
      a.parts.back().indices.push_back(static_cast<std::size_t>(std::stoul(text)));
    } else {
      a.parts.push_back(parse_part(text, a.source));
    }
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  return a;
}

template <class T>
void descend(T& node, const Assignment& a, std::size_t part, std::size_t index, const std::string& path);

// Matches one path part against the fields of a struct and descends into the match.
class OverrideVisitor {
 public:
  OverrideVisitor(const Assignment& a, std::size_t part, const std::string& path)
      : a_(a), part_(part), path_(path) {}

  template <class T>
  void field(const char* name, T& member) {
    keys_.emplace_back(name);
    if (matched_ || a_.parts[part_].key != name) return;
    matched_ = true;
    descend(member, a_, part_, 0, join_path(path_, name));
  }

  bool matched() const { return matched_; }
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  const Assignment& a_;
  std::size_t part_;
  const std::string& path_;
  bool matched_ = false;
  std::vector<std::string> keys_;
};

// Sets the value: strings and enums take the raw text; everything else is parsed as JSON, and text that
// is not JSON is read as a string so the type error shows what was given.
template <class T>
void assign(T& target, const Assignment& a, const std::string& path) {
  json value;
  if constexpr (std::is_same_v<T, int64_t>) {
    if (trim(a.text) == "auto" && is_vocab_path(path)) {
      target = kVocabAuto;  // resolved from data.train by resolve()
      return;
    }
  }
  if constexpr (std::is_same_v<T, std::string> || std::is_enum_v<T>) {
    value = a.text;
  } else {
    try {
      value = json::parse(a.text);
    } catch (const json::parse_error&) {
      value = a.text;
    } catch (const json::exception& e) {
      throw ConfigError(a.source, path, json_fields::exception_text(e));
    }
  }
  // Read into a copy: a value rejected halfway through an object leaves the config as it was.
  T updated = target;
  json_fields::read_value(value, updated, a.source, path);
  target = std::move(updated);
}

// `node` is the field at `path`; what is left to walk: indices[index..] of parts[part], then parts[part+1..].
template <class T>
void descend(T& node, const Assignment& a, std::size_t part, std::size_t index, const std::string& path) {
  const PathPart& current = a.parts[part];
  if (index < current.indices.size()) {
    const std::size_t i = current.indices[index];
    if constexpr (IsVector<T>::value) {
      if (i >= node.size()) {
        throw ConfigError(a.source, index_path(path, i),
                          "index " + std::to_string(i) + " is out of range: " + path + " has " +
                              std::to_string(node.size()) + " entries");
      }
      descend(node[i], a, part, index + 1, index_path(path, i));
    } else {
      throw ConfigError(a.source, path,
                        "is not an array, so it cannot be indexed with [" + std::to_string(i) + "]");
    }
    return;
  }
  if (part + 1 == a.parts.size()) {
    assign(node, a, path);
    return;
  }
  const std::string& next = a.parts[part + 1].key;
  if constexpr (IsStruct<T>::value) {
    OverrideVisitor visitor(a, part + 1, path);
    node.visit_fields(visitor);
    if (!visitor.matched()) {
      throw ConfigError(a.source, join_path(path, next),
                        json_fields::unknown_key(next, visitor.keys(), node));
    }
  } else {
    throw ConfigError(a.source, path,
                      "is a single value with no fields, so '" + next + "' cannot be set in it");
  }
}

}  // namespace

void apply_override(RunConfig& config, const std::string& assignment) {
  const Assignment a = parse_assignment(assignment);
  const std::string root;
  OverrideVisitor visitor(a, 0, root);
  config.visit_fields(visitor);
  if (!visitor.matched()) {
    throw ConfigError(a.source, a.parts[0].key,
                      json_fields::unknown_key(a.parts[0].key, visitor.keys(), config));
  }
}

}  // namespace causal
