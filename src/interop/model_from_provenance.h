// The model config an imported file describes: its own hyperparameters, refined by the causal config an
// export stored with it (which restores what the format does not say: the RoPE pairing, ffn_multiple_of,
// init_std, the kernel) when that config agrees with the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/model_config.h"

namespace causal {

// `from_file` holds the structural fields read from the file. When `provenance` (a run config as JSON, or
// null) has a model section whose structure equals it, that section is returned; otherwise `from_file`.
// Sets `*restored` to whether the provenance was used.
ModelConfig model_from_provenance(const ModelConfig& from_file, const nlohmann::json& provenance,
                                  bool* restored);

}  // namespace causal
