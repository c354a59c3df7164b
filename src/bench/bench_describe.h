// What `causal bench` derives from a config besides its timings (`causal bench --describe`), so that a
// baseline timed against it (tools/bench-pytorch) reads these figures instead of re-deriving them.
#pragma once

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace causal {

// One JSON object:
//   sequence_length  positions per row of the training batches (the task's, padding included)
//   inspect          `causal inspect --json` of the model at that context and the config's batch; its
//                    flops_per_token.training_causal is the figure bench's GFLOP/s and MFU use
//   parameters       [{name, shape, group, weight_decay}] in the model's order: the AdamW parameter group
//                    `train` puts it in (its index) and that group's weight decay
//   lr               the learning rate of steps 0 .. train.steps-1 (bench uses the last for later steps)
// Builds the task and the model on the CPU as bench would; nothing is timed or written. Throws what
// run_bench throws for a bad config or data.
nlohmann::json describe_bench(const RunConfig& config);

}  // namespace causal
