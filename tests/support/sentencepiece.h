// Test helper: skipping the SentencePiece tests in a build that cannot load libcausal_sentencepiece.so (the
// sanitizer builds, or a binary without the library next to it).
#pragma once

#include <string>

#include "core/errors.h"
#include "data/sentencepiece_backend.h"
#include "support/skip.h"

namespace causal::testing {

// The loader's own reason why SentencePiece is unavailable; empty when it loads.
inline std::string sentencepiece_skip_reason() {
  if (sentencepiece_available()) return "";
  try {
    make_sentencepiece_backend();
  } catch (const DataError& e) {
    return e.what();
  }
  return "SentencePiece is unavailable";
}

}  // namespace causal::testing

// Skips the enclosing test case (CAUSAL_SKIP_TEST) when SentencePiece cannot be loaded.
#define CAUSAL_SKIP_WITHOUT_SENTENCEPIECE()                                                  \
  do {                                                                                       \
    const std::string causal_spm_skip_reason = causal::testing::sentencepiece_skip_reason(); \
    if (!causal_spm_skip_reason.empty()) CAUSAL_SKIP_TEST(causal_spm_skip_reason);           \
  } while (false)
