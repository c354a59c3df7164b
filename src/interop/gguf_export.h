// InteropModel -> a GGUF v3 file llama.cpp runs: architecture "llama" or "gpt2", every hyperparameter
// written explicitly, the tokenizer as llama.cpp's SPM or byte-level vocab, the causal config as provenance.
#pragma once

#include <string>

#include "interop/interop_model.h"
#include "io/gguf_file.h"

namespace causal {

// Test-only: set to 1, q/k rows of a "halves" model are written unpermuted (a wrong file on purpose, the
// interop tests' negative control).
constexpr const char* kSkipQkPermutationEnv = "CAUSAL_EXPORT_SKIP_QK_PERMUTATION";

// The GGUF contents of `model` with 2-D weights in `dtype` (norm weights and biases stay F32, as llama.cpp
// expects). `source` names the checkpoint in errors. Throws ConfigError (exit 2) for what GGUF cannot
// express and UsageError when the run has no tokenizer to write.
GgufFile gguf_from_model(const InteropModel& model, GgufTensorType dtype, const std::string& source);

// gguf_from_model written whole or not at all to `path`.
void export_gguf(const InteropModel& model, GgufTensorType dtype, const std::string& path,
                 const std::string& source);

}  // namespace causal
