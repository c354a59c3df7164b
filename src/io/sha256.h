// SHA-256 (FIPS 180-4) of bytes and files: checkpoint manifests record it for every file they list.
// OpenSSL's libcrypto computes it (with the CPU's SHA extensions where it has them): a checkpoint of a
// pretrained model is gigabytes, hashed when written and again when verified.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

struct evp_md_ctx_st;

namespace causal {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::string hex_digest();  // finishes the hash; the object must not be updated afterwards

 private:
  struct Free {
    void operator()(evp_md_ctx_st* context) const;
  };
  std::unique_ptr<evp_md_ctx_st, Free> context_;
};

std::string sha256_hex(const std::string& bytes);
// Streams the file; throws IoError naming it when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace causal
