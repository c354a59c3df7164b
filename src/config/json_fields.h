// Visitor-based JSON reading and writing of config structs: the one place that maps field types to JSON.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_io.h"
#include "config/suggest.h"

namespace causal::json_fields {

using nlohmann::json;

// Detects config structs (anything with visit_fields) as opposed to leaf values.
struct ProbeVisitor {
  template <class T>
  void field(const char*, T&) {}
};
template <class T, class = void>
struct IsStruct : std::false_type {};
template <class T>
struct IsStruct<T, std::void_t<decltype(std::declval<T&>().visit_fields(std::declval<ProbeVisitor&>()))>>
    : std::true_type {};

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

template <class T>
inline constexpr bool kAlwaysFalse = false;

// "model" + "d_model" -> "model.d_model"; the root has an empty path.
std::string join_path(const std::string& parent, const std::string& key);
// "model.inputs" + 1 -> "model.inputs[1]".
std::string index_path(const std::string& path, std::size_t index);

// A JSON value for an error message: `string "abc"`, `integer 5`, `number 0.5`, `array [1,2]`, ...
std::string describe(const json& value);
// A number for a message: the shortest text that reads back to the same double, "1" rather than "1.0".
std::string format_number(double value);

// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string exception_text(const json::exception& e);

[[noreturn]] void throw_type_error(const std::string& source, const std::string& path,
                                   const std::string& expected, const json& got);

void read_leaf(const json& j, int64_t& out, const std::string& source, const std::string& path);
void read_leaf(const json& j, double& out, const std::string& source, const std::string& path);
void read_leaf(const json& j, bool& out, const std::string& source, const std::string& path);
void read_leaf(const json& j, std::string& out, const std::string& source, const std::string& path);

// "gelu|swiglu", the spellings in table order.
template <class E>
std::string enum_choices() {
  std::string out;
  for (const auto& entry : enum_table<E>()) out += (out.empty() ? "" : "|") + std::string(entry.second);
  return out;
}

template <class E>
void read_enum(const json& j, E& out, const std::string& source, const std::string& path) {
  if (j.is_string()) {
    const std::string& text = j.get_ref<const std::string&>();
    for (const auto& [value, name] : enum_table<E>()) {
      if (text == name) {
        out = value;
        return;
      }
    }
  }
  throw ConfigError(
      source, path,
      "expected one of " + enum_choices<E>() + ", got " +
          (j.is_string() ? j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : describe(j)));
}

// Keys a section would accept with a different `kind`; only the data section's fields depend on one.
template <class T>
KeysElsewhere keys_elsewhere(const T&) {
  return {};
}
KeysElsewhere keys_elsewhere(const DataConfig& data);

// Full paths of every config field named `key` ("lr" -> {"train.optimizer.lr"}), any data kind.
std::vector<std::string> field_paths_named(const std::string& key);

// The problem text for an unknown `key` among the `valid` keys of `node`.
template <class T>
std::string unknown_key(const std::string& key, const std::vector<std::string>& valid, const T& node) {
  return unknown_key_problem(key, valid, keys_elsewhere(node), field_paths_named(key));
}

template <class T>
void read_value(const json& j, T& out, const std::string& source, const std::string& path);

// Reads the keys present in a JSON object into a struct; absent keys keep the struct's current values.
class ObjectReader {
 public:
  ObjectReader(const json& object, const std::string& source, const std::string& path)
      : object_(object), source_(source), path_(path) {}

  template <class T>
  void field(const char* name, T& member) {
    keys_.emplace_back(name);
    const auto it = object_.find(name);
    if (it != object_.end()) read_value(*it, member, source_, join_path(path_, name));
  }

  const std::vector<std::string>& keys() const { return keys_; }

 private:
  const json& object_;
  const std::string& source_;
  const std::string& path_;
  std::vector<std::string> keys_;  // the keys valid here, in declaration order
};

// Reads `j` into `out`, typed by `out`; throws ConfigError naming `path` for any mismatch or unknown key.
template <class T>
void read_value(const json& j, T& out, const std::string& source, const std::string& path) {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                std::is_same_v<T, std::string>) {
    read_leaf(j, out, source, path);
  } else if constexpr (std::is_enum_v<T>) {
    read_enum(j, out, source, path);
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) throw_type_error(source, path, "an array", j);
    T values;
    for (std::size_t i = 0; i < j.size(); ++i) {
      typename T::value_type element{};  // struct elements start from their defaults
      read_value(j[i], element, source, index_path(path, i));
      values.push_back(std::move(element));
    }
    out = std::move(values);
  } else if constexpr (IsStruct<T>::value) {
    if (!j.is_object()) throw_type_error(source, path, "an object", j);
    ObjectReader reader(j, source, path);
    out.visit_fields(reader);
    for (const auto& item : j.items()) {
      const std::vector<std::string>& valid = reader.keys();
      if (std::find(valid.begin(), valid.end(), item.key()) == valid.end()) {
        throw ConfigError(source, join_path(path, item.key()), unknown_key(item.key(), valid, out));
      }
    }
  } else {
    static_assert(kAlwaysFalse<T>, "config field of a type json_fields cannot read");
  }
}

template <class Json, class T>
Json write_value(T& value);

template <class Json>
class ObjectWriter {
 public:
  explicit ObjectWriter(Json& object) : object_(object) {}

  template <class T>
  void field(const char* name, T& member) {
    object_[name] = write_value<Json>(member);
  }

 private:
  Json& object_;
};

// Every field of `value` as JSON (Json = nlohmann::json or nlohmann::ordered_json, which keeps field order).
// Takes a non-const reference only because visit_fields is shared with the reader; nothing is modified.
template <class Json, class T>
Json write_value(T& value) {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                std::is_same_v<T, std::string>) {
    return Json(value);
  } else if constexpr (std::is_enum_v<T>) {
    return Json(to_string(value));
  } else if constexpr (IsVector<T>::value) {
    Json array = Json::array();
    for (auto& element : value) array.push_back(write_value<Json>(element));
    return array;
  } else if constexpr (IsStruct<T>::value) {
    Json object = Json::object();
    ObjectWriter<Json> writer(object);
    value.visit_fields(writer);
    return object;
  } else {
    static_assert(kAlwaysFalse<T>, "config field of a type json_fields cannot write");
  }
}

}  // namespace causal::json_fields
