// libFuzzer harness: a safetensors file's length prefix and JSON header, through the check load_safetensors
// makes before it allocates a tensor (the allocation and copy then use only the verified ranges).
#include <string>

#include "fuzz_support.h"
#include "io/safetensors_header.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const SafetensorsHeader header = parse_safetensors_bytes("fuzz.safetensors", bytes);
    // What the loader then relies on: each range inside the file, holding exactly its tensor.
    uint64_t covered = 0;
    for (const SafetensorsEntry& e : header.entries) {
      fuzz::require(e.begin == covered && e.end >= e.begin, "ranges tile the data section");
      fuzz::require(8 + header.header_bytes + e.end <= size, "ranges inside the file");
      uint64_t bytes_needed = static_cast<uint64_t>(safetensors_dtype_bytes(e.dtype));
      for (int64_t d : e.shape) bytes_needed *= static_cast<uint64_t>(d);
      fuzz::require(e.end - e.begin == bytes_needed, "a range holds its tensor");
      covered = e.end;
    }
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
