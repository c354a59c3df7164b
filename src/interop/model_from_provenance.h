// The model config an imported file describes: its own hyperparameters, refined by the causal config an
// export stored with it (which restores what the format does not say: the RoPE pairing, ffn_multiple_of,
// init_std, the kernel) when that config agrees with the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/model_config.h"
#include "interop/tensor_map.h"

namespace causal {

// `from_file` holds the structural fields read from the file. When `provenance` (a run config as JSON, or
// null) has a model section whose structure equals it, that section is returned; otherwise `from_file`.
// Sets `*restored` to whether the provenance was used.
ModelConfig model_from_provenance(const ModelConfig& from_file, const nlohmann::json& provenance,
                                  bool* restored);

// What an importer reads from a file before any tensor: the model and how the file writes it.
struct ImportedConfig {
  TargetArchitecture arch = TargetArchitecture::kLlama;
  ModelConfig model;      // validated
  nlohmann::json config;  // the stored run config when it was restored, else null
};

// Validates `from_file` as a model section (a file's hyperparameters are untrusted: zero heads, or sizes
// whose products overflow, are a ConfigError naming `path` before any shape is computed from them), then
// refines it with the provenance as model_from_provenance does.
ImportedConfig imported_config(TargetArchitecture arch, const ModelConfig& from_file,
                               const nlohmann::json& provenance, const std::string& path);

}  // namespace causal
