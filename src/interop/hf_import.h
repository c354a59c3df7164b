// An HF folder (transformers' LlamaForCausalLM or GPT2LMHeadModel: config.json and model.safetensors, or
// shards listed in model.safetensors.index.json) -> InteropModel under causal's names.
#pragma once

#include <string>

#include "interop/interop_model.h"

namespace causal {

// An unknown model_type, a missing key or tensor, or a setting causal cannot compute exactly (another
// activation, biases in llama, rope scaling other than linear) is a ConfigError naming the file and key
// (exit 2). Weights are converted to float32. The causal config an export stored (config.json's
// causal_config) restores the original model section and q/k layout when it agrees with the folder.
InteropModel import_hf(const std::string& dir);

}  // namespace causal
