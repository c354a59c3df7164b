// InteropModel -> a folder transformers' from_pretrained loads: config.json (LlamaConfig or GPT2Config),
// model.safetensors under transformers' parameter names, generation_config.json and tokenizer files.
#pragma once

#include <string>

#include "interop/interop_model.h"
#include "io/gguf_file.h"

namespace causal {

// Writes the folder `out` whole or not at all (built in a temporary sibling, then renamed); `out` must not
// exist. Weights go in `dtype`. Throws ConfigError (exit 2) for what transformers cannot express,
// UsageError for an existing `out`, IoError when writing fails.
void export_hf(const InteropModel& model, GgufTensorType dtype, const std::string& out,
               const std::string& source);

}  // namespace causal
