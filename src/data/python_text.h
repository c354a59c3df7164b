// Python's string rules where causal must cut text exactly as Python does: lm-eval-harness's benchmark text
// (data/benchmark_text.h, data/choice_encoding.h) and the scorer's character counts. Text is UTF-8.
#pragma once

#include <cstdint>
#include <string_view>

namespace causal {

// Python's str.isspace() for one code point: ASCII's six, the separators U+001C..U+001F, and the Unicode
// spaces and breaks (U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
bool python_isspace(char32_t c);

// `text` without the trailing characters str.isspace() accepts (str.rstrip()); a malformed sequence counts
// as a character that is not a space.
std::string_view python_rstrip(std::string_view text);
// The same on both ends (str.strip()).
std::string_view python_strip(std::string_view text);

// Characters as Python's len() counts them: code points of valid UTF-8.
int64_t code_points(std::string_view text);

}  // namespace causal
