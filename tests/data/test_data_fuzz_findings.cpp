// Regression tests for what tests/fuzz found in the data layer (docs/faults.md#fuzzing), on the
// committed crash inputs themselves.
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.h"
#include "data/sentencepiece_backend.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/token_file.h"
#include "data/tokenizer.h"

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

CATCH_TEST_CASE("data fuzz findings: a model SentencePiece's trie builder throws on is a DataError",
                "[unit][data]") {
  // fuzz_sentencepiece: darts-clone threw an exception of its own through the shim (exit 1, not 3).
  if (!sentencepiece_available()) {
    CATCH_WARN("SKIPPED: SentencePiece is not available in this build (sanitizers)");
    return;
  }
  std::ifstream in(
      std::string(CAUSAL_SOURCE_DIR) + "/tests/fuzz/corpus/sentencepiece/crash-empty-piece-throws",
      std::ios::binary);
  const std::string model((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CATCH_REQUIRE(!model.empty());
  try {
    SentencePieceTokenizer tokenizer(model, "crash.model");
    CATCH_FAIL("loaded the model");
  } catch (const DataError& e) {
    CATCH_CHECK(std::string(e.what()).find("not a SentencePiece model") != std::string::npos);
  }
}

// Found while fixing the manifest's byte count (the same nlohmann cast): a tokenizer record, read from a
// token file's header or a run folder, with a float id was cast to int64, undefined behaviour out of range.
CATCH_TEST_CASE("data fuzz findings: a tokenizer record with a float id is a DataError", "[unit][data]") {
  for (const char* value : {"1e300", "2.5", "\"3\""}) {
    const nlohmann::json record =
        nlohmann::json::parse(std::string(R"({"name": "bytes", "vocab_size": 259, "bos_id": )") + value +
                              R"(, "eos_id": 257, "pad_id": 258, "model_sha256": ""})");
    CATCH_CHECK_THROWS_AS(tokenizer_info_from_json(record, "t.tok"), DataError);
  }
}
