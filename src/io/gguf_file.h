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

// Tensor element types causal reads, as ggml numbers them: the unquantized ones and the quantized ones
// gguf-py can dequantize without a lookup grid (io/gguf_quants.h decodes them). Every other ggml type is
// refused by name.
enum class GgufTensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBf16 = 30,
};

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
  std::string data;  // little-endian blocks, gguf_tensor_bytes(type, shape) of them
};

struct GgufFile {
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order; keys unique
  std::vector<GgufTensor> tensors;                          // in file order; names unique
  uint32_t alignment = 32;                                  // general.alignment (written when not 32)

  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;
};

// How a type packs elements: `elements` consecutive values of a row in `bytes` bytes (1 and the element
// size for F32/F16/BF16; 32 or 256 elements for the quantized ones).
struct GgufBlockSize {
  int64_t elements;
  int64_t bytes;
};

// Whether causal reads tensors of this ggml type number (a value of GgufTensorType).
bool gguf_type_readable(uint32_t type);
GgufBlockSize gguf_block_size(GgufTensorType type);
// Bytes per element of an unquantized type (F32, F16, BF16); a quantized type has none (UsageError).
int64_t gguf_element_size(GgufTensorType type);
// Bytes of a tensor of `shape` (outermost first): rows x the innermost dimension's blocks. Throws
// DataError naming the type when the innermost dimension is not a whole number of blocks, or a dimension
// is negative.
int64_t gguf_tensor_bytes(GgufTensorType type, const std::vector<int64_t>& shape);
// Every ggml type by its ggml name ("F32", "Q4_1", "IQ2_XXS", ...), others as "type 99 (unknown)".
std::string gguf_type_name(uint32_t type);

// Writes `file` whole or not at all (a temporary sibling renamed into place). Tensors of any readable type
// are written as given (quantized ones already quantized, e.g. by gguf_quantize_q8_0). Throws IoError.
void write_gguf(const std::string& path, const GgufFile& file);

// Reads and checks the container: magic, version 3, every tensor of a readable type (anything else is
// refused naming the tensor and its type) whose innermost dimension is a whole number of blocks, offsets
// aligned, inside the file and not overlapping. Quantized tensors keep their blocks as they are.
// Throws DataError naming the file and what is wrong.
GgufFile read_gguf(const std::string& path);

}  // namespace causal

namespace causal {

// The metadata alone (tensors empty), reading only as much of the file as the header takes: a tokenizer
// needs the vocabulary, not the (possibly quantized) weights. Throws DataError as read_gguf does.
GgufFile read_gguf_metadata(const std::string& path);

}  // namespace causal
