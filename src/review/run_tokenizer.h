// The tokenizer a run trained with, as its checkpoint keeps it: what `generate` encodes prompts with and
// `eval --tasks` encodes benchmarks with.
#pragma once

#include <memory>

#include "checkpoint/checkpoint.h"
#include "data/tokenizer.h"

namespace causal {

struct RunTokenizer {
  TokenizerInfo info;
  std::unique_ptr<Tokenizer> tokenizer;  // nullptr: ids only (imported from another trainer)
};

// From the checkpoint's tokenizer.json and tokenizer.model; checkpoints written before runs kept them name
// their tokenizer in the data identity (always "bytes" then). Throws CheckpointError (unreadable file) or
// DataError (the model bytes do not give the recorded identity).
RunTokenizer run_tokenizer(const CheckpointInfo& checkpoint);

}  // namespace causal
