// A GGUF file's hyperparameters -> the causal model they describe, and the checks of its tensors against
// that model: everything import reads before converting a tensor (fuzzed: tests/fuzz/fuzz_gguf.cpp).
#pragma once

#include <string>
#include <vector>

#include "interop/model_from_provenance.h"
#include "interop/tensor_map.h"
#include "io/gguf_file.h"

namespace causal {

// llama, qwen2 (llama with q/k/v biases, rotating halves) or gpt2 (run by llama.cpp with the tanh GELU:
// "gelu_tanh" unless the stored causal config says "gelu"). An unknown architecture, a missing or mistyped
// key, or hyperparameters causal cannot build exactly (another head dim, partial RoPE, rope scaling other
// than linear) is a ConfigError naming `path` and the key (exit 2). The causal config an export stored
// (causal.config) restores the original model section when it agrees with the file.
ImportedConfig gguf_model_config(const GgufFile& file, const std::string& path);

// The tensor `row` names, of the row's shape; a ConfigError naming `path` and the tensor otherwise.
const GgufTensor& gguf_tensor_for(const GgufFile& file, const MappedTensor& row, const std::string& path);

// tokenizer.ggml.tokens (id -> piece), or empty when the file lists none.
std::vector<std::string> gguf_vocab_pieces(const GgufFile& file);

}  // namespace causal
