// `--adapter` of eval and generate: which LoRA adapters go onto the base of the --run's checkpoint, and
// the identity of the weights behind a figure (what eval records and the report shows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"

namespace causal {

// The label of the base alone, adapters off.
inline constexpr const char* kNoAdapterLabel = "none (base)";
// Hex digits of a SHA-256 shown in labels and messages (the records keep the whole digest).
inline constexpr size_t kDigestShown = 12;

// Which adapters produced a figure. An empty label means a whole model of the run's own (no adapters at
// all), which eval records without an "adapter" field.
struct AdapterIdentity {
  std::string label;        // "none (base)", or the run folder and step: "runs/tuneA@step100"
  std::string checkpoint;   // the adapter checkpoint directory; "" for none
  int64_t step = 0;         // that checkpoint's step (0 for none)
  std::string sha256;       // its adapter.safetensors's SHA-256 (from the verified manifest); "" for none
  std::string base;         // the base checkpoint directory the adapters go onto
  std::string base_sha256;  // its model.safetensors's SHA-256

  bool none() const { return checkpoint.empty(); }
  nlohmann::json to_json() const;
  // Tolerant: a record written by another version reads as far as its fields go (the report reads these).
  static AdapterIdentity from_json(const nlohmann::json& json);
};

// "runs/tuneA@step100": a run folder as the user named it (a checkpoint directory inside one names that
// folder) and a step, the label of that run's adapters at that step.
std::string run_step_label(const std::filesystem::path& folder_or_checkpoint, int64_t step);

// "none (base)", or "runs/tuneA@step100 (adapter 1a2b3c4d5e6f)": a label with its file's digest prefix.
std::string describe_adapter(const AdapterIdentity& identity);

// What --adapter SPEC resolved to against the --run's checkpoint: the identity, and the checkpoint whose
// adapters to load (nullopt: the base alone, or a whole model of the run's own).
struct AdapterChoice {
  AdapterIdentity identity;
  std::optional<CheckpointInfo> adapters;
  // The weights are the --run checkpoint's own (no --adapter, "none" on a whole model, or a path that is
  // the --run's checkpoint): its figures are the default ones and go where eval writes those.
  bool run_own = true;
};

// Resolves `spec` for `run`, the --run checkpoint of run folder `run_dir`:
//   ""      the run's own: its adapters (an adapter checkpoint) or nothing (a whole checkpoint);
//   "none"  the base alone: for an adapter checkpoint its base, for a whole one the checkpoint itself;
//   a path  a LoRA run folder (its newest valid checkpoint) or an adapter checkpoint directory, whose base
//           must be the --run's base (the same model.safetensors SHA-256).
// Reads and verifies manifests only, no tensor. Throws UsageError (exit 2) for a path that names no run
// folder or checkpoint, a whole checkpoint given as adapters, or adapters on another base; CheckpointError
// for a damaged checkpoint. `command` ("eval", "generate") prefixes the messages.
AdapterChoice resolve_adapter(const std::string& spec, const CheckpointInfo& run, const std::string& run_dir,
                              const std::string& command);

}  // namespace causal
