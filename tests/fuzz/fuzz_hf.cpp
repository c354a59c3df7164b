// libFuzzer harness: the files of a Hugging Face model folder that `causal import` parses itself, each
// given the input: config.json (-> the causal model), model.safetensors.index.json (-> the shard files)
// and tokenizer.model (our SentencePiece ModelProto reader). The weights are safetensors (fuzz_safetensors).
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_support.h"
#include "interop/hf_model_config.h"
#include "interop/vocab.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const nlohmann::json json = nlohmann::json::parse(bytes, nullptr, false);
  if (!json.is_discarded()) {
    try {
      const ModelConfig m = hf_model_config(json, "config.json").model;
      fuzz::require(m.n_heads > 0 && m.d_model % m.n_heads == 0, "an imported model is a valid one");
    } catch (const Error& e) {
      fuzz::expected(e);
    }
    try {
      for (const std::string& shard : hf_shard_files(json, "model.safetensors.index.json"))
        fuzz::require(!shard.empty() && shard.find('/') == std::string::npos && shard != "..",
                      "shards are files inside the model folder");
    } catch (const Error& e) {
      fuzz::expected(e);
    }
  }
  try {
    const Vocab vocab = parse_sentencepiece(bytes);
    fuzz::require(vocab.pieces.size() == vocab.scores.size() && vocab.pieces.size() == vocab.kinds.size(),
                  "a vocab lists a score and a kind for every piece");
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
