// An imported model -> a run folder `causal train --resume auto` continues: config.json, the tokenizer
// files, and checkpoints/step_00000000 in exactly the format training writes (docs/checkpoints.md).
#pragma once

#include <string>
#include <vector>

#include "interop/interop_model.h"

namespace causal {

struct CheckpointInfo;  // checkpoint/checkpoint.h

struct ImportRequest {
  std::string out;     // the run folder to create (must be empty or absent)
  std::string config;  // optional base config (data, train, ...); its model section is replaced
  std::vector<std::string> overrides;  // --set, applied after the imported model section
  // "f32" keeps the (dequantized) weights as they are; "bf16" / "f16" rounds them to that precision, so the
  // run starts from what a pipeline in that dtype would hold (checkpoints still store float32).
  std::string dtype = "f32";
  std::string base;  // --format peft: the run folder whose newest checkpoint the adapter applies to
};

// With text data named (data.train and data.val), the checkpoint records its identity as training does:
// its tokenizer must have the model's vocab size, and the same pieces when the file carries a vocab
// (DataError otherwise). Without data, the file's own tokenizer (model.tokenizer) goes into the run, and
// training later takes any data that tokenizer encoded; a file without one needs its data named (UsageError).
// Returns the checkpoint directory.
std::string import_run(const InteropModel& model, const std::string& input, const ImportRequest& request);

// The newest valid checkpoint of run folder `run_dir` as an adapter's base: it must hold the whole model
// (an adapter checkpoint is refused, naming its own base). Throws UsageError or CheckpointError.
CheckpointInfo adapter_base_checkpoint(const std::string& run_dir);

// Adapters imported onto `base` -> a run folder as training on it would write one: config.json (the base's
// config with train.lora = adapter.lora; request.overrides may change anything but model.* and
// train.lora.*), its tokenizer files, and checkpoints/step_00000000, an adapter checkpoint (adapters, empty
// AdamW state) whose state.json names `base` by path and SHA-256. Its data is the base's (from its
// beginning), or, for a base imported without data, any data the tokenizer encoded, as import_run's.
// Everything is checked before request.out is created. Returns the checkpoint directory.
std::string import_adapter_run(const CheckpointInfo& base, const InteropAdapter& adapter,
                               const std::string& input, const ImportRequest& request);

}  // namespace causal
