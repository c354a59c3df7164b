// GGUF v3 bytes <-> GgufFile. Little-endian throughout (as every machine causal runs on).
#include "io/gguf_file.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <set>

#include "core/errors.h"
#include "io/atomic_file.h"

namespace causal {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kVersion = 3;

size_t scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

bool is_integer(GgufType type) {
  return type != GgufType::kFloat32 && type != GgufType::kFloat64 && type != GgufType::kBool &&
         scalar_size(type) > 0;
}

class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) {}
  template <class T>
  void raw(T value) {
    out_.write(reinterpret_cast<const char*>(&value), sizeof(T));
    offset_ += sizeof(T);
  }
  void bytes(const std::string& data) {
    out_.write(data.data(), static_cast<std::streamsize>(data.size()));
    offset_ += data.size();
  }
  void string(const std::string& s) {
    raw<uint64_t>(s.size());
    bytes(s);
  }
  void pad_to(uint64_t alignment) {
    while (offset_ % alignment != 0) raw<uint8_t>(0);
  }
  // One number of `type` from the widened representation.
  void number(GgufType type, int64_t i, uint64_t u, double d) {
    switch (type) {
      case GgufType::kUint8:
        raw<uint8_t>(static_cast<uint8_t>(i));
        break;
      case GgufType::kInt8:
        raw<int8_t>(static_cast<int8_t>(i));
        break;
      case GgufType::kUint16:
        raw<uint16_t>(static_cast<uint16_t>(i));
        break;
      case GgufType::kInt16:
        raw<int16_t>(static_cast<int16_t>(i));
        break;
      case GgufType::kUint32:
        raw<uint32_t>(static_cast<uint32_t>(i));
        break;
      case GgufType::kInt32:
        raw<int32_t>(static_cast<int32_t>(i));
        break;
      case GgufType::kUint64:
        raw<uint64_t>(u ? u : static_cast<uint64_t>(i));
        break;
      case GgufType::kInt64:
        raw<int64_t>(i);
        break;
      case GgufType::kFloat32:
        raw<float>(static_cast<float>(d));
        break;
      case GgufType::kFloat64:
        raw<double>(d);
        break;
      case GgufType::kBool:
        raw<uint8_t>(i ? 1 : 0);
        break;
      default:
        throw IoError("[gguf] cannot write a value of type " + std::to_string(static_cast<int>(type)));
    }
  }
  void value(const GgufValue& v) {
    raw<uint32_t>(static_cast<uint32_t>(v.type));
    if (v.type == GgufType::kString) return string(std::get<std::string>(v.value));
    if (v.type == GgufType::kBool) return raw<uint8_t>(std::get<bool>(v.value) ? 1 : 0);
    if (v.type == GgufType::kArray) {
      raw<uint32_t>(static_cast<uint32_t>(v.element));
      if (v.element == GgufType::kString) {
        const auto& items = std::get<std::vector<std::string>>(v.value);
        raw<uint64_t>(items.size());
        for (const std::string& s : items) string(s);
      } else if (is_integer(v.element)) {
        const auto& items = std::get<std::vector<int64_t>>(v.value);
        raw<uint64_t>(items.size());
        for (int64_t i : items) number(v.element, i, 0, 0);
      } else {
        const auto& items = std::get<std::vector<double>>(v.value);
        raw<uint64_t>(items.size());
        for (double d : items) number(v.element, 0, 0, d);
      }
      return;
    }
    if (v.type == GgufType::kUint64 && std::holds_alternative<uint64_t>(v.value))
      return number(v.type, 0, std::get<uint64_t>(v.value), 0);
    if (is_integer(v.type)) return number(v.type, std::get<int64_t>(v.value), 0, 0);
    number(v.type, 0, 0, std::get<double>(v.value));
  }
  uint64_t offset() const { return offset_; }

 private:
  std::ostream& out_;
  uint64_t offset_ = 0;
};

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

class Reader {
 public:
  Reader(const std::string& bytes, std::string path) : bytes_(bytes), path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError("[gguf] " + path_ + ": " + what + " (at byte " + std::to_string(at_) + ")");
  }
  template <class T>
  T raw() {
    if (at_ + sizeof(T) > bytes_.size()) fail("file ends inside the header");
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string string() {
    const uint64_t n = raw<uint64_t>();
    if (n > bytes_.size() - at_) fail("string of " + std::to_string(n) + " bytes runs past the end");
    std::string s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  int64_t integer(GgufType type) {
    switch (type) {
      case GgufType::kUint8:
        return raw<uint8_t>();
      case GgufType::kInt8:
        return raw<int8_t>();
      case GgufType::kUint16:
        return raw<uint16_t>();
      case GgufType::kInt16:
        return raw<int16_t>();
      case GgufType::kUint32:
        return raw<uint32_t>();
      case GgufType::kInt32:
        return raw<int32_t>();
      case GgufType::kUint64:
        return static_cast<int64_t>(raw<uint64_t>());
      case GgufType::kInt64:
        return raw<int64_t>();
      case GgufType::kBool:
        return raw<uint8_t>();
      default:
        fail("not an integer type " + std::to_string(static_cast<uint32_t>(type)));
    }
  }
  double real(GgufType type) { return type == GgufType::kFloat32 ? raw<float>() : raw<double>(); }
  GgufValue value() {
    GgufValue v;
    v.type = static_cast<GgufType>(raw<uint32_t>());
    v.element = v.type;
    if (v.type == GgufType::kString) {
      v.value = string();
    } else if (v.type == GgufType::kBool) {
      v.value = raw<uint8_t>() != 0;
    } else if (v.type == GgufType::kArray) {
      v.element = static_cast<GgufType>(raw<uint32_t>());
      const uint64_t n = raw<uint64_t>();
      if (n > bytes_.size() - at_) fail("array of " + std::to_string(n) + " elements runs past the end");
      if (v.element == GgufType::kString) {
        std::vector<std::string> items(n);
        for (auto& s : items) s = string();
        v.value = std::move(items);
      } else if (is_integer(v.element) || v.element == GgufType::kBool) {
        std::vector<int64_t> items(n);
        for (auto& i : items) i = integer(v.element);
        v.value = std::move(items);
      } else if (v.element == GgufType::kFloat32 || v.element == GgufType::kFloat64) {
        std::vector<double> items(n);
        for (auto& d : items) d = real(v.element);
        v.value = std::move(items);
      } else {
        fail("array of unsupported element type " + std::to_string(static_cast<uint32_t>(v.element)));
      }
    } else if (v.type == GgufType::kUint64) {
      v.value = raw<uint64_t>();
    } else if (is_integer(v.type)) {
      v.value = integer(v.type);
    } else if (v.type == GgufType::kFloat32 || v.type == GgufType::kFloat64) {
      v.value = real(v.type);
    } else {
      fail("value of unknown type " + std::to_string(static_cast<uint32_t>(v.type)));
    }
    return v;
  }
  uint64_t at() const { return at_; }

 private:
  const std::string& bytes_;
  std::string path_;
  uint64_t at_ = 0;
};

}  // namespace

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  for (const GgufTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

bool gguf_type_readable(uint32_t type) {
  switch (static_cast<GgufTensorType>(type)) {
    case GgufTensorType::kF32:
    case GgufTensorType::kF16:
    case GgufTensorType::kBf16:
    case GgufTensorType::kQ4_0:
    case GgufTensorType::kQ4_1:
    case GgufTensorType::kQ5_0:
    case GgufTensorType::kQ5_1:
    case GgufTensorType::kQ8_0:
    case GgufTensorType::kQ2_K:
    case GgufTensorType::kQ3_K:
    case GgufTensorType::kQ4_K:
    case GgufTensorType::kQ5_K:
    case GgufTensorType::kQ6_K:
      return true;
  }
  return false;
}

GgufBlockSize gguf_block_size(GgufTensorType type) {
  // ggml's block sizes (ggml-common.h): a scale or two in float16, then the packed quants.
  switch (type) {
    case GgufTensorType::kF32:
      return {1, 4};
    case GgufTensorType::kF16:
    case GgufTensorType::kBf16:
      return {1, 2};
    case GgufTensorType::kQ4_0:
      return {32, 18};
    case GgufTensorType::kQ4_1:
      return {32, 20};
    case GgufTensorType::kQ5_0:
      return {32, 22};
    case GgufTensorType::kQ5_1:
      return {32, 24};
    case GgufTensorType::kQ8_0:
      return {32, 34};
    case GgufTensorType::kQ2_K:
      return {256, 84};
    case GgufTensorType::kQ3_K:
      return {256, 110};
    case GgufTensorType::kQ4_K:
      return {256, 144};
    case GgufTensorType::kQ5_K:
      return {256, 176};
    case GgufTensorType::kQ6_K:
      return {256, 210};
  }
  throw UsageError("[gguf] no block size for " + gguf_type_name(static_cast<uint32_t>(type)));
}

int64_t gguf_element_size(GgufTensorType type) {
  const GgufBlockSize block = gguf_block_size(type);
  if (block.elements != 1)
    throw UsageError("[gguf] " + gguf_type_name(static_cast<uint32_t>(type)) +
                     " is quantized: its elements have no size of their own (gguf_tensor_bytes)");
  return block.bytes;
}

int64_t gguf_tensor_bytes(GgufTensorType type, const std::vector<int64_t>& shape) {
  const GgufBlockSize block = gguf_block_size(type);
  const std::string name = gguf_type_name(static_cast<uint32_t>(type));
  // A tensor of no dimensions is one element, as ggml counts it; ggml stores no such tensors.
  const int64_t row = shape.empty() ? 1 : shape.back();
  if (row < 0 || row % block.elements != 0)
    throw DataError("[gguf] a " + name + " row of " + std::to_string(row) +
                    " elements: expected a multiple of " + std::to_string(block.elements) + " (its block)");
  int64_t bytes = row / block.elements * block.bytes;
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    if (shape[d] < 0) throw DataError("[gguf] a " + name + " tensor with a negative dimension");
    bytes *= shape[d];
  }
  return bytes;
}

std::string gguf_type_name(uint32_t type) {
  // ggml.h's enum ggml_type; the gaps are types ggml has removed.
  static const std::map<uint32_t, const char*> kNames = {
      {0, "F32"},     {1, "F16"},    {2, "Q4_0"},     {3, "Q4_1"},    {6, "Q5_0"},     {7, "Q5_1"},
      {8, "Q8_0"},    {9, "Q8_1"},   {10, "Q2_K"},    {11, "Q3_K"},   {12, "Q4_K"},    {13, "Q5_K"},
      {14, "Q6_K"},   {15, "Q8_K"},  {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
      {20, "IQ4_NL"}, {21, "IQ3_S"}, {22, "IQ2_S"},   {23, "IQ4_XS"}, {24, "I8"},      {25, "I16"},
      {26, "I32"},    {27, "I64"},   {28, "F64"},     {29, "IQ1_M"},  {30, "BF16"},    {34, "TQ1_0"},
      {35, "TQ2_0"},  {39, "MXFP4"}, {40, "NVFP4"},   {41, "Q1_0"}};
  const auto found = kNames.find(type);
  if (found != kNames.end()) return found->second;
  return "type " + std::to_string(type) + " (unknown)";
}

void write_gguf(const std::string& path, const GgufFile& file) {
  std::set<std::string> names;
  for (const GgufTensor& t : file.tensors) {
    if (!gguf_type_readable(static_cast<uint32_t>(t.type)))
      throw IoError("[gguf] " + path + ": tensor " + t.name + " is " +
                    gguf_type_name(static_cast<uint32_t>(t.type)) + ", which causal does not write");
    int64_t needed = 0;
    try {
      needed = gguf_tensor_bytes(t.type, t.shape);
    } catch (const DataError& e) {
      throw IoError("[gguf] " + path + ": tensor " + t.name + ": " + e.what());
    }
    if (static_cast<int64_t>(t.data.size()) != needed)
      throw IoError("[gguf] " + path + ": tensor " + t.name + " holds " + std::to_string(t.data.size()) +
                    " bytes, its shape needs " + std::to_string(needed));
    if (!names.insert(t.name).second) throw IoError("[gguf] " + path + ": duplicate tensor " + t.name);
  }
  std::vector<std::pair<std::string, GgufValue>> metadata = file.metadata;
  if (file.alignment != 32 && !file.find("general.alignment"))
    metadata.emplace_back("general.alignment", GgufValue::u32(file.alignment));
  write_file_atomically(path, [&](std::ostream& out) {
    Writer w(out);
    w.raw<uint32_t>(kGgufMagic);
    w.raw<uint32_t>(kVersion);
    w.raw<uint64_t>(file.tensors.size());
    w.raw<uint64_t>(metadata.size());
    for (const auto& [key, value] : metadata) {
      w.string(key);
      w.value(value);
    }
    uint64_t offset = 0;
    for (const GgufTensor& t : file.tensors) {
      w.string(t.name);
      w.raw<uint32_t>(static_cast<uint32_t>(t.shape.size()));
      // ggml lists dimensions innermost first.
      for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) w.raw<uint64_t>(static_cast<uint64_t>(*d));
      w.raw<uint32_t>(static_cast<uint32_t>(t.type));
      w.raw<uint64_t>(offset);
      offset = align_up(offset + t.data.size(), file.alignment);
    }
    w.pad_to(file.alignment);
    for (const GgufTensor& t : file.tensors) {
      w.bytes(t.data);
      w.pad_to(file.alignment);
    }
  });
}

GgufFile read_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[gguf] cannot open " + path + ": expected a GGUF file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader r(bytes, path);
  if (bytes.size() < 24 || r.raw<uint32_t>() != kGgufMagic) r.fail("not a GGUF file (magic is not \"GGUF\")");
  const uint32_t version = r.raw<uint32_t>();
  if (version != kVersion) r.fail("GGUF version " + std::to_string(version) + ", expected 3");
  const uint64_t n_tensors = r.raw<uint64_t>();
  const uint64_t n_kv = r.raw<uint64_t>();
  if (n_tensors > bytes.size() || n_kv > bytes.size()) r.fail("implausible tensor or key count");
  GgufFile file;
  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string();
    if (!keys.insert(key).second) r.fail("duplicate key " + key);
    file.metadata.emplace_back(std::move(key), r.value());
  }
  if (const GgufValue* a = file.find("general.alignment")) {
    if (a->type != GgufType::kUint32) r.fail("general.alignment is not a u32");
    file.alignment = static_cast<uint32_t>(std::get<int64_t>(a->value));
    if (file.alignment == 0 || (file.alignment & (file.alignment - 1)) != 0)
      r.fail("general.alignment " + std::to_string(file.alignment) + " is not a power of two");
  }
  std::vector<uint64_t> offsets;
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = r.string();
    if (!names.insert(t.name).second) r.fail("duplicate tensor " + t.name);
    const uint32_t dims = r.raw<uint32_t>();
    if (dims == 0 || dims > 4) r.fail("tensor " + t.name + " has " + std::to_string(dims) + " dimensions");
    t.shape.resize(dims);
    for (uint32_t d = 0; d < dims; ++d) t.shape[dims - 1 - d] = static_cast<int64_t>(r.raw<uint64_t>());
    const uint32_t type = r.raw<uint32_t>();
    if (!gguf_type_readable(type))
      r.fail("tensor " + t.name + " is " + gguf_type_name(type) +
             "; causal reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K");
    t.type = static_cast<GgufTensorType>(type);
    offsets.push_back(r.raw<uint64_t>());
    file.tensors.push_back(std::move(t));
  }
  const uint64_t data_start = align_up(r.at(), file.alignment);
  std::map<uint64_t, uint64_t> ranges;  // start -> end, to find overlaps
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    GgufTensor& t = file.tensors[i];
    const GgufBlockSize block = gguf_block_size(t.type);
    const int64_t row = t.shape.back();
    if (row > 0 && row % block.elements != 0)
      r.fail("tensor " + t.name + " is " + gguf_type_name(static_cast<uint32_t>(t.type)) + " with rows of " +
             std::to_string(row) + " elements, not a whole number of its " + std::to_string(block.elements) +
             "-element blocks");
    // The innermost dimension counts blocks of block.bytes; the others count rows.
    uint64_t size = static_cast<uint64_t>(block.bytes);
    for (size_t d = 0; d < t.shape.size(); ++d) {
      // An empty tensor has no bytes of its own: written back it would share its offset with the next.
      if (t.shape[d] == 0) r.fail("tensor " + t.name + " has an empty dimension");
      const uint64_t count =
          static_cast<uint64_t>(d + 1 == t.shape.size() ? row / block.elements : t.shape[d]);
      if (t.shape[d] < 0 || size > bytes.size() / count)
        r.fail("tensor " + t.name + " is larger than the file");
      size *= count;
    }
    if (offsets[i] % file.alignment != 0) r.fail("tensor " + t.name + " is not aligned");
    const uint64_t start = data_start + offsets[i];
    if (start > bytes.size() || size > bytes.size() - start)
      r.fail("tensor " + t.name + " runs past the end of the file");
    if (!ranges.emplace(start, start + size).second) r.fail("tensor " + t.name + " overlaps another");
    t.data = bytes.substr(start, size);
  }
  uint64_t end = 0;
  for (const auto& [start, stop] : ranges) {
    if (start < end) r.fail("tensor data ranges overlap");
    end = stop;
  }
  return file;
}

}  // namespace causal

namespace causal {

GgufFile read_gguf_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw DataError("[gguf] cannot open " + path + ": expected a GGUF file");
  const auto file_size = static_cast<uint64_t>(in.tellg());
  // The header's size is known only by reading it: read a prefix, and a larger one while the header runs
  // past it.
  for (uint64_t want = uint64_t{1} << 20;; want *= 4) {
    const uint64_t size = want < file_size ? want : file_size;
    std::string bytes(size, '\0');
    in.seekg(0);
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (static_cast<uint64_t>(in.gcount()) != size) throw DataError("[gguf] cannot read " + path);
    try {
      Reader r(bytes, path);
      if (bytes.size() < 24 || r.raw<uint32_t>() != kGgufMagic)
        r.fail("not a GGUF file (magic is not \"GGUF\")");
      const uint32_t version = r.raw<uint32_t>();
      if (version != kVersion) r.fail("GGUF version " + std::to_string(version) + ", expected 3");
      r.raw<uint64_t>();  // tensor count
      const uint64_t n_kv = r.raw<uint64_t>();
      if (n_kv > file_size) r.fail("implausible key count");
      GgufFile file;
      std::set<std::string> keys;
      for (uint64_t i = 0; i < n_kv; ++i) {
        std::string key = r.string();
        if (!keys.insert(key).second) r.fail("duplicate key " + key);
        file.metadata.emplace_back(std::move(key), r.value());
      }
      return file;
    } catch (const DataError&) {
      if (size == file_size) throw;  // the whole file was read: the error is the file's
    }
  }
}

}  // namespace causal
