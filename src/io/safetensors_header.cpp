// safetensors header parsing and validation (no tensors).
#include "io/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/json_integer.h"

namespace causal {
namespace {

std::string header_where(const std::string& path) { return "[safetensors] " + path + ": "; }

// a * b, or false when it would not fit in uint64 (a header may declare any shape).
bool multiply(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& value,
                             uint64_t data_bytes) {
  const std::string bad = header_where(path) + "tensor '" + name + "' ";
  if (!value.is_object()) throw CheckpointError(bad + "has a malformed entry: expected an object");
  SafetensorsEntry e;
  e.name = name;
  try {
    e.dtype = value.at("dtype").get<std::string>();
    const nlohmann::json& shape = value.at("shape");
    if (!shape.is_array()) throw CheckpointError(bad + "has a malformed entry: shape must be an array");
    for (const nlohmann::json& d : shape) {
      if (!json_integer_fits<int64_t>(d))
        throw CheckpointError(bad + "has a malformed entry: shape must hold integers");
    }
    e.shape = shape.get<std::vector<int64_t>>();
    const nlohmann::json& offsets = value.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2 || !json_integer_fits<uint64_t>(offsets.at(0)) ||
        !json_integer_fits<uint64_t>(offsets.at(1)))
      throw CheckpointError(bad + "has a malformed entry: data_offsets must be [begin, end], whole numbers");
    e.begin = offsets.at(0).get<uint64_t>();
    e.end = offsets.at(1).get<uint64_t>();
  } catch (const nlohmann::json::exception& ex) {
    throw CheckpointError(bad + "has a malformed entry: " + ex.what());
  }
  const int64_t element = safetensors_dtype_bytes(e.dtype);
  if (element == 0) throw CheckpointError(bad + "has unknown dtype " + e.dtype);
  uint64_t expected = static_cast<uint64_t>(element);
  for (int64_t d : e.shape) {
    if (d < 0) throw CheckpointError(bad + "has a negative dimension");
    if (!multiply(expected, static_cast<uint64_t>(d), &expected))
      throw CheckpointError(bad + "has a shape whose byte count does not fit in 64 bits");
  }
  // Also bounds what the loader allocates: every range lies inside the file.
  if (e.end < e.begin || e.end - e.begin != expected || e.end > data_bytes) {
    throw CheckpointError(bad + "byte range [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                          ") does not hold its " + std::to_string(expected) + " bytes inside the " +
                          std::to_string(data_bytes) + "-byte data section");
  }
  return e;
}

}  // namespace

int64_t safetensors_dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes{{"F32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2},
                                                    {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
                                                    {"U8", 1},  {"BOOL", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

uint64_t safetensors_header_length(const std::string& path, uint64_t file_bytes,
                                   const unsigned char* prefix) {
  if (file_bytes < 8)
    throw CheckpointError(header_where(path) + "file of " + std::to_string(file_bytes) +
                          " bytes has no header");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  if (length > file_bytes - 8) {
    throw CheckpointError(header_where(path) + "header length " + std::to_string(length) +
                          " exceeds the file (" + std::to_string(file_bytes) + " bytes)");
  }
  return length;
}

SafetensorsHeader parse_safetensors_header(const std::string& path, uint64_t file_bytes,
                                           uint64_t header_bytes, const std::string& text) {
  SafetensorsHeader out;
  out.header_bytes = header_bytes;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(header_where(path) + "header is not JSON: " + e.what());
  }
  if (!header.is_object()) throw CheckpointError(header_where(path) + "header is not a JSON object");
  const uint64_t data_bytes = file_bytes - 8 - header_bytes;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        throw CheckpointError(header_where(path) + "__metadata__ is not an object of strings");
      for (const auto& [key, item] : value.items()) {
        if (!item.is_string())
          throw CheckpointError(header_where(path) + "__metadata__ entry '" + key + "' is not a string");
        out.metadata[key] = item.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(parse_entry(path, name, value, data_bytes));
  }
  // The ranges must tile the data section: no overlap, no gap, nothing left over.
  std::sort(out.entries.begin(), out.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  uint64_t covered = 0;
  for (const SafetensorsEntry& e : out.entries) {
    if (e.begin != covered) {
      throw CheckpointError(header_where(path) + "tensor '" + e.name + "' starts at byte " +
                            std::to_string(e.begin) + ", expected " + std::to_string(covered) +
                            " (ranges overlap or leave a gap)");
    }
    covered = e.end;
  }
  if (covered != data_bytes)
    throw CheckpointError(header_where(path) + std::to_string(data_bytes - covered) +
                          " bytes after the last tensor");
  return out;
}

SafetensorsHeader parse_safetensors_bytes(const std::string& path, const std::string& bytes) {
  const uint64_t length =
      safetensors_header_length(path, bytes.size(), reinterpret_cast<const unsigned char*>(bytes.data()));
  return parse_safetensors_header(path, bytes.size(), length, bytes.substr(8, length));
}

}  // namespace causal
