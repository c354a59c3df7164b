// An HF folder's config.json and shard index -> the causal model and the files that hold its weights:
// everything import reads before converting a tensor (fuzzed: tests/fuzz/fuzz_hf.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "interop/model_from_provenance.h"

namespace causal {

// transformers' LlamaForCausalLM, Qwen2ForCausalLM or GPT2LMHeadModel config. An unknown model_type, a
// missing or mistyped key, or a setting causal cannot compute exactly (another activation, biases in llama,
// qwen2's sliding window, rope scaling other than linear) is a ConfigError naming `path` and the key
// (exit 2). The causal config an export
// stored (causal_config) restores the original model section when it agrees with the file.
ImportedConfig hf_model_config(const nlohmann::json& config, const std::string& path);

// The shard files model.safetensors.index.json lists in its weight_map, each once, sorted. Each must be a
// plain file name in the folder: a ConfigError naming `path` otherwise.
std::vector<std::string> hf_shard_files(const nlohmann::json& index, const std::string& path);

}  // namespace causal
