// One answer of a multiple-choice item as token ids: lm-eval-harness's _encode_pair with the run's BOS
// first, and the window the model reads when the pair is longer than its context.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace causal {

struct ChoiceTokens {
  std::vector<int64_t> context;       // BOS, then the context's ids
  std::vector<int64_t> continuation;  // the ids whose log-probabilities are summed
};

// The context's trailing whitespace (Python's) moves to the front of the continuation; then
// whole = [BOS] + encode(context + continuation), context = [BOS] + encode(context) and
// continuation = whole[len(context):], so a token spanning the boundary counts as the continuation's.
// BOS is the tokenizer's bos_id always, as every document causal trains on starts with it.
ChoiceTokens encode_choice(const Tokenizer& tokenizer, std::string_view context,
                           std::string_view continuation);

// What the model reads for a pair: the last max_seq_len + 1 ids of context + continuation without the last
// one (lm-eval's window; a longer pair loses its start, BOS included). Its last `continuation.size()`
// positions predict the continuation; requires 1 <= continuation.size() <= max_seq_len.
struct ChoiceWindow {
  std::vector<int64_t> inputs;  // (T) T <= max_seq_len
  bool truncated = false;       // the pair did not fit and lost ids on the left
};
ChoiceWindow choice_window(const ChoiceTokens& tokens, int64_t max_seq_len);

}  // namespace causal
