// Forensics of a run stopped by a non-finite step: everything needed to replay exactly that step, written to
// RUN/forensics/step_N/ (an atomic directory with a manifest, like a checkpoint):
//   batch.safetensors      the step's micro-batches: "mb<i>.tokens|positions|segment_ids|key_valid|labels"
//   model.safetensors, optimizer.safetensors   the weights and AdamW state the step started from
//   state.json             step, lr, the error message, RNG state before the step, the injected fault (if
//                          any), the last good checkpoint
//   config.json            the resolved config
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "train/fault_injection.h"
#include "train/trainer.h"

namespace causal {

std::filesystem::path write_forensics(const std::filesystem::path& run_dir, const AbortedStep& step,
                                      torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                                      const nlohmann::json& config, const std::string& last_checkpoint,
                                      const FaultInjection& fault);

struct ReplayResult {
  int64_t step = 0;
  std::string original_message;  // what the run reported
  StepOutcome outcome;           // what the replay computed
};

// Rebuilds the model from the bundle, restores the RNG, re-applies the fault and recomputes the step's
// forward/backward and health verdict (no update). Throws CheckpointError for a damaged bundle.
ReplayResult replay_step(const std::filesystem::path& bundle);

}  // namespace causal
