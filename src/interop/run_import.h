// An imported model -> a run folder `causal train --resume auto` continues: config.json, the tokenizer
// files, and checkpoints/step_00000000 in exactly the format training writes (docs/checkpoints.md).
#pragma once

#include <string>
#include <vector>

#include "interop/interop_model.h"

namespace causal {

struct ImportRequest {
  std::string out;     // the run folder to create (must be empty or absent)
  std::string config;  // optional base config (data, train, ...); its model section is replaced
  std::vector<std::string> overrides;  // --set, applied after the imported model section
};

// A checkpoint also records the training data's identity (tokenizer, token counts, SHA-256), so the run's
// text data (data.train, data.val) must be named: its tokenizer must have the model's vocab size, and the
// same pieces when the file carries a vocab (DataError otherwise). Returns the checkpoint directory.
std::string import_run(const InteropModel& model, const std::string& input, const ImportRequest& request);

}  // namespace causal
