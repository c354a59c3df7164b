// The one hex helper (core/hex.h) that SHA-256 digests, token files and generator states are written with
// (tests/io/test_sha256.cpp holds the digests to FIPS 180-4): fixed vectors, every byte value both ways
// against a digit table written out here, and what it refuses.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/hex.h"

CATCH_TEST_CASE("hex: bytes to lowercase digits, high nibble first, and back", "[unit][core]") {
  const uint8_t bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
  CATCH_CHECK(causal::to_hex(bytes, sizeof(bytes)) == "00017f80abff");
  CATCH_CHECK(causal::to_hex(bytes, 0).empty());
  CATCH_CHECK(causal::from_hex("00017f80abff") == std::vector<uint8_t>(bytes, bytes + sizeof(bytes)));
  CATCH_CHECK(causal::from_hex("") == std::vector<uint8_t>{});

  // Every byte value, against a digit table written out here.
  const std::string digits = "0123456789abcdef";
  std::vector<uint8_t> all(256);
  std::string expected;
  for (int i = 0; i < 256; ++i) {
    all[i] = static_cast<uint8_t>(i);
    expected += std::string{digits[i / 16], digits[i % 16]};
  }
  CATCH_CHECK(causal::to_hex(all.data(), all.size()) == expected);
  CATCH_CHECK(causal::from_hex(expected) == all);
}

CATCH_TEST_CASE("hex: odd lengths, upper case and other characters are refused", "[unit][core]") {
  for (const char* text : {"0", "abc", "AB", "0g", "zz", " 0", "00 "}) {
    CATCH_INFO(text);
    CATCH_CHECK(!causal::from_hex(text).has_value());
  }
}
