// A GGUF file (llama or gpt2, F32/F16/BF16 tensors) -> InteropModel under causal's names.
#pragma once

#include <string>

#include "interop/interop_model.h"
#include "io/gguf_file.h"

namespace causal {

// Maps `file` (read from `path`, named in errors). An unknown architecture, a missing key or tensor, or a
// shape that does not fit the hyperparameters is a ConfigError naming `path` and the key (exit 2);
// quantized tensors are refused by read_gguf. When the file carries the causal config an export wrote
// (causal.config) and agrees with it, the original model section and q/k layout are restored, so export
// then import gives back the same model bit for bit in F32.
InteropModel model_from_gguf(const GgufFile& file, const std::string& path);

InteropModel import_gguf(const std::string& path);

}  // namespace causal
