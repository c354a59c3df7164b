// SHA-256 through OpenSSL's EVP interface (see sha256.h).
#include "io/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <stdexcept>
#include <vector>

#include "core/errors.h"
#include "core/hex.h"

namespace causal {

void Sha256::Free::operator()(evp_md_ctx_st* context) const { EVP_MD_CTX_free(context); }

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("[io] OpenSSL could not start a SHA-256 digest");
}

void Sha256::update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(context_.get(), data, size) != 1)
    throw std::runtime_error("[io] OpenSSL failed to hash " + std::to_string(size) + " bytes");
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest, &length) != 1 || length != 32)
    throw std::runtime_error("[io] OpenSSL failed to finish a SHA-256 digest");
  return to_hex(digest, length);
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex_digest();
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("[io] cannot read " + path + " to hash it");
  Sha256 h;
  std::vector<char> chunk(1 << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    h.update(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw IoError("[io] read error while hashing " + path);
  return h.hex_digest();
}

}  // namespace causal
