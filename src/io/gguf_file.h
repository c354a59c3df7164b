// The GGUF v3 container (llama.cpp's model file): typed key/value metadata and named tensors, read and
// written by our own code (format: the ggml repository's gguf specification). Knows nothing about any
// architecture.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace causal {

// Value types as GGUF numbers them.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Tensor element types: only the unquantized ones causal writes and reads; others are named on refusal.
enum class GgufTensorType : uint32_t { kF32 = 0, kF16 = 1, kBf16 = 30 };

// One metadata value. Integers keep their GGUF type so a file reads back to the same bytes; arrays hold
// one element type (strings, or numbers widened to int64/double with `element` recording the GGUF type).
struct GgufValue {
  GgufType type = GgufType::kUint32;
  GgufType element = GgufType::kUint32;  // arrays only
  std::variant<int64_t, uint64_t, double, bool, std::string, std::vector<std::string>, std::vector<int64_t>,
               std::vector<double>>
      value;

  static GgufValue u32(uint32_t v) { return {GgufType::kUint32, GgufType::kUint32, int64_t{v}}; }
  static GgufValue i32(int32_t v) { return {GgufType::kInt32, GgufType::kInt32, int64_t{v}}; }
  static GgufValue f32(float v) { return {GgufType::kFloat32, GgufType::kFloat32, double{v}}; }
  static GgufValue boolean(bool v) { return {GgufType::kBool, GgufType::kBool, v}; }
  static GgufValue string(std::string v) { return {GgufType::kString, GgufType::kString, std::move(v)}; }
  static GgufValue strings(std::vector<std::string> v) {
    return {GgufType::kArray, GgufType::kString, std::move(v)};
  }
  static GgufValue f32s(std::vector<double> v) {
    return {GgufType::kArray, GgufType::kFloat32, std::move(v)};
  }
  static GgufValue i32s(std::vector<int64_t> v) { return {GgufType::kArray, GgufType::kInt32, std::move(v)}; }

  bool operator==(const GgufValue& other) const {
    return type == other.type && (type != GgufType::kArray || element == other.element) &&
           value == other.value;
  }
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;  // row-major, outermost first (PyTorch order; the file stores it reversed)
  GgufTensorType type = GgufTensorType::kF32;
  std::string data;  // little-endian elements, shape's product times the element size
};

struct GgufFile {
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order; keys unique
  std::vector<GgufTensor> tensors;                          // in file order; names unique
  uint32_t alignment = 32;                                  // general.alignment (written when not 32)

  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;
};

// Bytes per element of an unquantized type.
int64_t gguf_element_size(GgufTensorType type);
// "F32", "F16", "BF16", or "type N (quantized or unknown)".
std::string gguf_type_name(uint32_t type);

// Writes `file` whole or not at all (a temporary sibling renamed into place). Throws IoError.
void write_gguf(const std::string& path, const GgufFile& file);

// Reads and checks the container: magic, version 3, every tensor unquantized (F32/F16/BF16, anything else
// is refused naming the tensor and its type), offsets aligned, inside the file and not overlapping.
// Throws DataError naming the file and what is wrong.
GgufFile read_gguf(const std::string& path);

}  // namespace causal

namespace causal {

// The metadata alone (tensors empty), reading only as much of the file as the header takes: a tokenizer
// needs the vocabulary, not the (possibly quantized) weights. Throws DataError as read_gguf does.
GgufFile read_gguf_metadata(const std::string& path);

}  // namespace causal
