// The model `causal export` writes: a verified checkpoint's weights, config and tokenizer, and the check
// that the target format can express it exactly.
#pragma once

#include <string>

#include "interop/interop_model.h"

namespace causal {

// Loads checkpoint `ref` of run folder `run_dir` (find_checkpoint's forms) through load_checkpoint_model,
// which verifies the manifest's SHA-256 before any tensor is read. An adapter checkpoint's tensors are its
// base's with the adapters folded in when `merge`, else its base's, the adapters apart (adapters).
// Throws CheckpointError.
InteropModel load_export_source(const std::string& run_dir, const std::string& ref, bool merge = false);

// Refuses (ConfigError, exit 2) an adapter checkpoint for a format of whole models: `model.adapters` set.
void check_whole_model(const InteropModel& model, const std::string& format);

// The architecture `model` is written as in `format` ("gguf" or "hf"). Anything the format cannot express
// exactly is a ConfigError (exit 2) naming the field, its value and what the format supports; `source`
// names the checkpoint's config.json.
TargetArchitecture check_exportable(const ModelConfig& model, const std::string& format,
                                    const std::string& source);

}  // namespace causal
