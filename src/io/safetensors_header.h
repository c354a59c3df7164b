// The safetensors header check, apart from tensors: what a file's header declares and whether it can be
// trusted, so the check is fuzzed without LibTorch and the loader allocates only what it verified.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace causal {

// One tensor as the header declares it; [begin, end) is relative to the data section.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", ... (safetensors_dtype_bytes knows it)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;              // the JSON's length; the data section starts at 8 + header_bytes
  std::vector<SafetensorsEntry> entries;  // sorted by begin: they tile the data section exactly
  std::map<std::string, std::string> metadata;
};

// Bytes per element of a safetensors dtype name, 0 when this build does not read that dtype.
int64_t safetensors_dtype_bytes(const std::string& dtype);

// The little-endian header length in the first 8 bytes of a file of `file_bytes` bytes; throws
// CheckpointError when the file is shorter than 8 bytes or the header would run past its end (checked
// before anything is allocated for it).
uint64_t safetensors_header_length(const std::string& path, uint64_t file_bytes, const unsigned char* prefix);

// Parses the 8-byte length and the JSON header `text` of a file of `file_bytes` bytes (`path` names it in
// errors) and checks it: known dtypes, non-negative shapes whose byte counts fit in 64 bits, ranges that
// hold exactly their tensor's bytes and together tile the data section, string metadata. Throws
// CheckpointError naming the file and the tensor on anything else.
SafetensorsHeader parse_safetensors_header(const std::string& path, uint64_t file_bytes,
                                           uint64_t header_bytes, const std::string& text);

// The same from a whole file's bytes (the fuzz harness's entry; the loader streams instead).
SafetensorsHeader parse_safetensors_bytes(const std::string& path, const std::string& bytes);

}  // namespace causal
