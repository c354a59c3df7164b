// The fuzz harnesses' SentencePiece backend: the shim linked in, not dlopened. The fuzzer's sanitizers
// refuse RTLD_DEEPBIND, and a harness links no LibTorch, so SentencePiece's protobuf has nothing to clash
// with (src/data/sentencepiece_backend.h explains the clash in the product).
#include "data/sentencepiece_backend.h"

namespace causal {

bool sentencepiece_available() { return true; }

std::unique_ptr<SentencePieceBackend> make_sentencepiece_backend() {
  return std::unique_ptr<SentencePieceBackend>(causal_new_sentencepiece_backend());
}

}  // namespace causal
