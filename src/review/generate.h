// `causal generate`: sampling from a text checkpoint with the KV cache, optionally checked step by step
// against the full causal pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "review/adapter_choice.h"

namespace causal {

struct GenerateRequest {
  std::string run_dir;
  std::string checkpoint;              // "" newest valid, a step number, or a checkpoint directory
  std::vector<std::string> overrides;  // device, threads
  std::string prompt;                  // text; encoded as [BOS, ids of the text...]
  std::vector<int64_t> prompt_ids;     // ids after BOS instead of text (runs with no known tokenizer)
  std::string tokenizer;               // a .model file to encode and decode with; "" = the run's own
  int64_t max_new_tokens = 200;
  double temperature = 1.0;   // 0 = greedy
  int64_t top_k = 0;          // 0 = the whole vocabulary
  uint64_t seed = 0;          // sampling generator; the same seed gives the same text
  bool verify_cache = false;  // recompute the full pass at every step and compare logits
  // Chat: the user's message (and an optional system message) rendered through the run's chat template,
  // or the family `chat_template` names; generation stops at the template's end-of-turn token.
  std::string chat;
  std::string system;
  std::string chat_template;
  std::string adapter;  // --adapter (review/adapter_choice.h): "" as trained, "none", or a LoRA run's path
};

struct GenerateResult {
  std::vector<int64_t> prompt_ids;     // BOS (when the tokenizer's model expects it) + prompt
  std::vector<int64_t> generated_ids;  // new tokens (EOS included when it ended the text)
  std::string text;                    // the decoded new tokens ("" when no tokenizer is known)
  bool decoded = true;                 // false: no tokenizer known, only ids
  std::string stop_reason;             // "eos", "end_of_turn" (chat), "max_new_tokens" or "context"
  std::string chat_family;             // chat: the template family used
  double max_abs_diff = 0.0;           // with verify_cache: largest |cached - full| logit over all steps
  int64_t step = 0;                    // checkpoint step
  AdapterIdentity adapter;             // the adapters generating (an empty label: a whole model as it is)
  double prompt_seconds = 0.0;         // the prompt's forward pass (prefill)
  double generate_seconds = 0.0;       // the tokens after it, one forward pass each
};

// Context rule: the prompt with BOS may hold at most model.max_seq_len tokens (never truncated; longer is
// UsageError); generation stops at EOS, after max_new_tokens, or when the next input would
// sit at position max_seq_len.
// Throws CheckpointError/ConfigError/DataError (not a text run, another tokenizer).
GenerateResult generate_text(const GenerateRequest& request);

}  // namespace causal
