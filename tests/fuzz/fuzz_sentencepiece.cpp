// libFuzzer harness: a SentencePiece .model file through SentencePieceTokenizer (the checks causal makes
// on a model: specials, the 256 byte pieces), then encoding and decoding a fixed text when the model loads.
#include <string>

#include "data/sentencepiece_tokenizer.h"
#include "fuzz_support.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string model(reinterpret_cast<const char*>(data), size);
  try {
    SentencePieceTokenizer tokenizer(model, "fuzz.model");
    // Ids in the vocabulary, and decoding whatever encode gave never fails. Not asserted: that the text
    // comes back. docs/data.md promises that only for models without a normalizer rewriting text (those
    // `causal data tokenizer train` writes); the fuzzer found an accepted model that drops spaces.
    const std::string text = "The jury\n\xff\xfe caf\xc3\xa9 \xe2\x96\x81 x";
    const std::vector<int64_t> ids = tokenizer.encode(text);
    for (int64_t id : ids) fuzz::require(id >= 0 && id < tokenizer.info().vocab_size, "ids in the vocab");
    tokenizer.decode(ids);
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
