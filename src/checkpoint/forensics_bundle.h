// Forensics of a run stopped by a non-finite step: everything needed to replay exactly that step, written to
// RUN/forensics/step_N/ (an atomic directory with a manifest, like a checkpoint):
//   batch.safetensors      the step's micro-batches: "mb<i>.tokens|positions|segment_ids|key_valid|labels"
//   model.safetensors, optimizer.safetensors   the weights and AdamW state the step started from; an
//                          adapter run's bundle holds adapter.safetensors instead of model.safetensors,
//                          the adapters alone, its frozen base named by state.json's "base" as in its
//                          checkpoints
//   state.json             step, lr, the error message, RNG state before the step, the injected fault (if
//                          any), the last good checkpoint, the base
//   config.json            the resolved config
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/runtime.h"
#include "data/batch.h"

namespace causal {

struct ForensicsBundle {
  int64_t step = 0;  // 1-based: the step that failed
  double lr = 0.0;
  std::string message;                 // why the run stopped, naming the first non-finite tensor
  std::vector<Batch> micro_batches;    // the step's inputs (any device when written; CPU when read)
  nlohmann::json rng_before;           // capture_global_rng() before the step's forward pass
  std::string fault;                   // FaultInjection::describe() of an injected fault, "" for none
  std::string last_checkpoint;         // the newest checkpoint written before the failure, "" for none
  nlohmann::json config;               // the resolved config
  std::optional<ThreadSplit> threads;  // the run's CPU thread split (absent in older bundles)
  std::optional<BaseCheckpoint> base;  // an adapter run's frozen base (absent: the bundle holds every weight)
};

// Writes RUN/forensics/step_N (replacing a bundle of the same step) with `model` and `optimizer` as the
// step started. Returns the bundle directory. Throws CheckpointError.
std::filesystem::path write_forensics(const std::filesystem::path& run_dir, const ForensicsBundle& bundle,
                                      torch::nn::Module& model, const torch::optim::Optimizer& optimizer);

// Verifies the bundle's manifest and reads everything but the weights (load_forensics_weights reads those).
// Throws CheckpointError for a damaged or malformed bundle.
ForensicsBundle read_forensics(const std::filesystem::path& dir);

// The bundle's weights into `model`: its own, or an adapter run's adapters with its base's weights (the
// base verified and refused by name when changed or gone, as for a checkpoint). Throws CheckpointError.
void load_forensics_weights(const std::filesystem::path& dir, const ForensicsBundle& bundle,
                            torch::nn::Module& model);

}  // namespace causal
