// Regression tests for what tests/fuzz found in the token file reader (docs/faults.md#fuzzing), on the
// committed crash inputs themselves.
#include <catch2/catch.hpp>
#include <string>

#include "core/errors.h"
#include "data/token_file.h"

using namespace causal;

CATCH_TEST_CASE("token file fuzz findings: a document byte count beyond int64 is refused", "[unit][data]") {
  // fuzz_token_file: a v2 file whose byte count (u64) read back as a negative int64 opened without error.
  const std::string path =
      std::string(CAUSAL_SOURCE_DIR) + "/tests/fuzz/corpus/token_file/crash-negative-byte-count";
  try {
    TokenFile file(path);
    CATCH_FAIL("opened " + path);
  } catch (const DataError& e) {
    CATCH_CHECK(std::string(e.what()).find("exceeds 2^63 - 1") != std::string::npos);
  }
}
