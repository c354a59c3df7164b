// lm-eval-harness's pair encoding and input window, on causal's tokenizers.
#include "data/choice_encoding.h"

#include <algorithm>
#include <string>

#include "data/python_text.h"

namespace causal {

ChoiceTokens encode_choice(const Tokenizer& tokenizer, std::string_view context,
                           std::string_view continuation) {
  // Tokenizers that fold a space into the next word ("Ġword") see " word" whole this way.
  const std::string_view kept = python_rstrip(context);
  const std::string moved = std::string(context.substr(kept.size())) + std::string(continuation);
  const int64_t bos = tokenizer.info().bos_id;
  ChoiceTokens out;
  out.context.push_back(bos);
  for (int64_t id : tokenizer.encode(kept)) out.context.push_back(id);
  std::vector<int64_t> whole = {bos};
  for (int64_t id : tokenizer.encode(std::string(kept) + moved)) whole.push_back(id);
  if (whole.size() > out.context.size())
    out.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(out.context.size()), whole.end());
  return out;
}

ChoiceWindow choice_window(const ChoiceTokens& tokens, int64_t max_seq_len) {
  std::vector<int64_t> pair = tokens.context;
  pair.insert(pair.end(), tokens.continuation.begin(), tokens.continuation.end());
  const size_t keep = std::min(pair.size(), static_cast<size_t>(max_seq_len) + 1);
  ChoiceWindow window;
  window.truncated = keep < pair.size();
  window.inputs.assign(pair.end() - static_cast<std::ptrdiff_t>(keep), pair.end() - 1);
  return window;
}

}  // namespace causal
