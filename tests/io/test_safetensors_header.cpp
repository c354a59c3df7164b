// The safetensors header check on hostile headers (found by tests/fuzz/fuzz_safetensors and by review):
// each is a CheckpointError naming the file, never an overflow, a stray exception or a huge allocation.
#include <catch2/catch.hpp>
#include <string>

#include "core/errors.h"
#include "io/safetensors_header.h"

using namespace causal;

namespace {

// A file of the header `json` followed by `data_bytes` zero bytes.
std::string header_file_with(const std::string& json, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return bytes + json + std::string(data_bytes, '\0');
}

std::string header_error_of(const std::string& bytes) {
  try {
    parse_safetensors_bytes("t.safetensors", bytes);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

CATCH_TEST_CASE("safetensors header: a valid header parses, ranges sorted", "[unit][io]") {
  const auto h = parse_safetensors_bytes(
      "t.safetensors", header_file_with(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                                        R"("a":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                                        R"("__metadata__":{"format":"pt"}})",
                                        12));
  CATCH_REQUIRE(h.entries.size() == 2);
  CATCH_CHECK(h.entries[0].name == "a");
  CATCH_CHECK(h.metadata.at("format") == "pt");
}

CATCH_TEST_CASE("safetensors header: hostile headers are CheckpointErrors", "[unit][io]") {
  // Dimensions whose product overflows 64 bits used to be multiplied as int64 (undefined behaviour).
  CATCH_CHECK(header_error_of(header_file_with(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],)"
                                               R"("data_offsets":[0,0]}})",
                                               0))
                  .find("does not fit in 64 bits") != std::string::npos);
  // Metadata values that are not strings escaped as nlohmann::json::type_error (exit 1, not 4).
  CATCH_CHECK(header_error_of(header_file_with(R"({"__metadata__":{"k":1}})", 0)).find("is not a string") !=
              std::string::npos);
  CATCH_CHECK(header_error_of(header_file_with(R"({"__metadata__":[]})", 0)).find("not an object") !=
              std::string::npos);
  CATCH_CHECK(header_error_of(header_file_with(R"({"a":[]})", 0)).find("malformed entry") !=
              std::string::npos);
  // Floats where integers belong were cast by nlohmann's get<>(), undefined behaviour out of range.
  CATCH_CHECK(
      header_error_of(header_file_with(R"({"a":{"dtype":"F32","shape":[2e82],"data_offsets":[0,0]}})", 0))
          .find("shape must hold integers") != std::string::npos);
  CATCH_CHECK(
      header_error_of(header_file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4e30]}})", 0))
          .find("whole numbers") != std::string::npos);
  CATCH_CHECK(
      header_error_of(header_file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4))
          .find("data_offsets must be") != std::string::npos);
  CATCH_CHECK(header_error_of(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8)).find("exceeds the file") !=
              std::string::npos);
  CATCH_CHECK(header_error_of("abc").find("has no header") != std::string::npos);
}
