// A model restored from a run's checkpoint, for `causal eval` and `causal generate`.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "model/transformer.h"
#include "review/adapter_choice.h"

namespace causal {

struct CheckpointModel {
  RunConfig config;            // the checkpoint's config with the accepted overrides applied
  CheckpointInfo checkpoint;   // which checkpoint, its step and state
  Transformer model{nullptr};  // weights loaded, eval mode, on `device`
  c10::Device device{c10::kCPU};
  AdapterIdentity adapter;  // whose adapters `model` holds (an empty label: a whole model, the run's own)
  bool own_weights = true;  // the checkpoint's own weights (AdapterChoice::run_own)
};

// Loads `ref` of run folder `run_dir` (find_checkpoint: "" newest, a step, or a path). `overrides`
// ("path=value") may change data.*, device, threads, and the model fields that leave the weights as
// trained: model.max_seq_len (not with learned positions), model.attention, model.attention_block and
// model.rope.{scaling,factor,original_max_seq_len,beta_fast,beta_slow}; anything else is a ConfigError
// naming the reason. model.rope.original_max_seq_len stays the trained value unless set. Throws
// CheckpointError (missing/corrupt/mismatched checkpoint) or ConfigError.
// `adapter` is --adapter (resolve_adapter): "" the checkpoint as trained, "none" its base alone, or the
// adapters of another LoRA run on the same base; the config stays the checkpoint's (data, device, model),
// with train.lora the adapters' own. UsageError (exit 2) for adapters that do not apply; `command` names
// the command in that message.
CheckpointModel load_checkpoint_model(const std::string& run_dir, const std::string& ref,
                                      const std::vector<std::string>& overrides,
                                      const std::string& adapter = "", const std::string& command = "eval");

}  // namespace causal
