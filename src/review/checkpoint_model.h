// A model restored from a run's checkpoint, for `causal eval` and `causal generate`.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "model/transformer.h"

namespace causal {

struct CheckpointModel {
  RunConfig config;            // the checkpoint's config with the accepted overrides applied
  CheckpointInfo checkpoint;   // which checkpoint, its step and state
  Transformer model{nullptr};  // weights loaded, eval mode, on `device`
  c10::Device device{c10::kCPU};
};

// Loads `ref` of run folder `run_dir` (find_checkpoint: "" newest, a step, or a path). `overrides`
// ("path=value") may change data.*, device, threads, and the model fields that leave the weights as
// trained: model.max_seq_len (not with learned positions), model.attention, model.attention_block and
// model.rope.{scaling,factor,original_max_seq_len,beta_fast,beta_slow}; anything else is a ConfigError
// naming the reason. model.rope.original_max_seq_len stays the trained value unless set. Throws
// CheckpointError (missing/corrupt/mismatched checkpoint) or ConfigError.
CheckpointModel load_checkpoint_model(const std::string& run_dir, const std::string& ref,
                                      const std::vector<std::string>& overrides);

}  // namespace causal
