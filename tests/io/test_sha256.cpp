// SHA-256 against the FIPS 180-4 test vectors and the system's sha256sum.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "io/sha256.h"

using causal::sha256_file;
using causal::sha256_hex;

CATCH_TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[unit][checkpoint]") {
  CATCH_CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CATCH_CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CATCH_CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CATCH_CHECK(sha256_hex(std::string(1000000, 'a')) ==
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Streaming a file in chunks gives the same digest as coreutils' sha256sum.
CATCH_TEST_CASE("sha256_file agrees with sha256sum", "[unit][checkpoint]") {
  namespace fs = std::filesystem;
  const fs::path path = fs::temp_directory_path() / ("causal_sha_" + std::to_string(::getpid()));
  std::string data;
  for (int i = 0; i < 200000; ++i) data += static_cast<char>((i * 7919) % 251);
  std::ofstream(path, std::ios::binary) << data;
  CATCH_CHECK(sha256_file(path.string()) == sha256_hex(data));
  FILE* pipe = ::popen(("sha256sum " + path.string()).c_str(), "r");
  CATCH_REQUIRE(pipe != nullptr);
  char line[128] = {};
  const bool read = std::fgets(line, sizeof(line), pipe) != nullptr;
  ::pclose(pipe);
  CATCH_REQUIRE(read);
  CATCH_CHECK(std::string(line).substr(0, 64) == sha256_hex(data));
  fs::remove(path);
  CATCH_CHECK_THROWS(sha256_file(path.string()));
}
