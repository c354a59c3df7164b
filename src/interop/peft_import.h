// A PEFT LoRA folder (adapter_config.json + adapter_model.safetensors, as save_pretrained writes it) read
// back onto a causal base model: the inverse of write_peft_adapter (interop/adapter_export.h). Names come
// from the base's HF tensor map, q/k rows of B are moved back to the model's RoPE pairing.
#pragma once

#include <filesystem>
#include <string>

#include "config/model_config.h"
#include "interop/interop_model.h"
#include "interop/run_import.h"

namespace causal {

// Reads `dir` as adapters on `base` (the base checkpoint's resolved model; `base_source` names its
// config.json in errors). Each adapted product gets its own A (r, in) and B (out, r) in float32 under its
// product path; GPT-2's fused c_attn is split into q, k and v (a dense adapter: B's row blocks sharing A; a
// block-diagonal one of rank k r with rank_pattern, as causal's export writes it: one block per part).
// The result must be what train.lora can hold: one rank and one scale for every product, and whole kinds
// (a kind adapted on every block). Anything else is a ConfigError naming adapter_config.json and its key, or
// adapter_model.safetensors and the tensor; nothing is written.
InteropAdapter read_peft_adapter(const std::filesystem::path& dir, const ModelConfig& base,
                                 const std::string& base_source);

// `causal import --format peft`: the newest checkpoint of run folder request.base (a whole model), the
// adapter `input` read onto it, and the run folder request.out (import_adapter_run). Returns the
// checkpoint directory.
std::string import_peft(const std::string& input, const ImportRequest& request);

}  // namespace causal
