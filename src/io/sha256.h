// SHA-256 (FIPS 180-4) of bytes and files: checkpoint manifests record it for every file they list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace causal {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // finishes the hash; the object must not be updated afterwards

 private:
  void compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(const std::string& bytes);
// Streams the file; throws IoError naming it when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace causal
