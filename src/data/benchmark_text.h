// lm-eval-harness's hellaswag task cleans its text before scoring; these do the same, with Python's meanings
// (data/python_text.h), so that causal and lm-eval score the same strings (docs/checkpoints.md#benchmarks).
#pragma once

#include <string>
#include <string_view>

namespace causal {

// lm-eval's hellaswag `preprocess`: strip, " [title]" -> ". ", every "[...]" on one line removed, then each
// double space made single (one pass, as str.replace).
std::string hellaswag_preprocess(std::string_view text);

// lm-eval's hellaswag query: preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize()).
// capitalize() is applied to ASCII letters only (first upper, the rest lower); other characters stay.
std::string hellaswag_query(std::string_view activity_label, std::string_view ctx_a, std::string_view ctx_b);

}  // namespace causal
