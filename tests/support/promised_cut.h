// Test helper: the cuts a byte-level BPE tokenizer's split_point promises, restated from its contract
// (SplitRule), as opposed to its fallback; the unit and interop tokenizer tests both hold it to them.
#pragma once

#include <cctype>
#include <cstddef>
#include <string>

#include "data/pre_tokenizer.h"

namespace causal::testing {

inline bool promised_cut(SplitRule rule, const std::string& text, size_t p) {
  auto letter = [&](size_t i) {
    return i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]));
  };
  if (p < 2 || p >= text.size() || text[p - 1] != '\n') return false;
  if (rule == SplitRule::kAfterLineBreaks) return letter(p);
  if (rule == SplitRule::kGpt2LineBreaks)
    return (letter(p) && text[p - 2] > ' ' && text[p - 2] < 0x7F) || (text[p] == '\n' && letter(p + 1));
  return false;
}

}  // namespace causal::testing
