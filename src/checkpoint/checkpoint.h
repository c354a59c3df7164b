// What a training checkpoint holds and how it is written and read back (docs/checkpoints.md):
//   model.safetensors      parameters under their stable names (docs/model.md); or, for an adapter run,
//   adapter.safetensors    the trainable (adapter) parameters alone, the base named by state.json's "base"
//   optimizer.safetensors  AdamW moments and step counts, "<parameter>.exp_avg|exp_avg_sq|step"
//   state.json             step, counters, data source state, every RNG state
//   config.json            the resolved config the run was trained with
//   manifest.json          size and SHA-256 of each file, written last (checkpoint_dir.h)
#pragma once

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/rng_state.h"
#include "core/runtime.h"
#include "io/safetensors.h"

namespace causal {

// The frozen weights an adapter checkpoint applies to: a full checkpoint directory, by absolute path and
// the SHA-256 of its model.safetensors, so that a base changed or replaced under the run is refused.
struct BaseCheckpoint {
  std::filesystem::path dir;
  std::string model_sha256;

  nlohmann::json to_json() const;
  static BaseCheckpoint from_json(const nlohmann::json& json, const std::string& source);
};

// The base of a run continued from `from`: its own base for an adapter checkpoint, else `from` itself
// (verified; its model.safetensors's SHA-256 from its manifest). Throws CheckpointError.
BaseCheckpoint base_of(const std::filesystem::path& from_dir, const std::optional<BaseCheckpoint>& from_base);

// state.json: everything besides tensors that the run needs to continue as if never stopped.
struct TrainingState {
  int64_t step = 0;                    // optimizer steps completed (skipped ones included)
  int64_t tokens_seen = 0;             // input positions fed to the model, padding included
  int64_t skipped_steps = 0;           // updates skipped for non-finite values
  double initial_loss = 0.0;           // fixed-batch loss before step one (results.json)
  nlohmann::json data;                 // BatchSource::state()
  nlohmann::json data_identity;        // what the data must still be on resume (tokenizer, token counts)
  nlohmann::json rng;                  // capture_global_rng()
  int64_t consecutive_skips = 0;       // skipped steps in a row (nonfinite = "skip")
  nlohmann::json spike_detector;       // SpikeDetector::state()
  int64_t world_size = 1;              // data-parallel ranks that trained it (absent in older checkpoints: 1)
  std::optional<ThreadSplit> threads;  // the CPU thread split it was trained with (absent in older ones)
  std::optional<std::string> optimizer_kernel;  // "fused" | "separate" (absent in older ones)
  std::optional<BaseCheckpoint> base;           // an adapter run's frozen base (absent: full weights)

  nlohmann::json to_json() const;
  static TrainingState from_json(const nlohmann::json& json, const std::string& source);
};

// The data identity of a model imported without data: only its tokenizer, so that training may name any
// text data that tokenizer encoded (and start that data from its beginning).
nlohmann::json identity_without_data(const std::string& tokenizer, const std::string& description);
bool awaits_data(const TrainingState& state);

// {"aten": A, "blas": B}, as state.json and forensics hold it; reading throws CheckpointError for counts
// below 1 and nlohmann's exception for a missing field.
nlohmann::json thread_split_to_json(const ThreadSplit& split);
ThreadSplit thread_split_from_json(const nlohmann::json& json, const std::string& source);

// States of the default generators behind dropout and init: the CPU one, and the device's when it is
// not the CPU. Restore them last, after everything that might draw from them.
nlohmann::json capture_global_rng(const c10::Device& device);
// A snapshot in that form (what a forensics bundle stores of the step's start).
nlohmann::json rng_json(const GeneratorSnapshot& snapshot);
void restore_global_rng(const nlohmann::json& rng, const c10::Device& device);

// Writes root/step_<state.step> atomically and returns it; `extra_files` (name -> bytes, e.g. the
// tokenizer) go in too and are verified by the manifest like the rest; `after_tensors` runs once the tensor
// files are in the temporary directory (fault injection). Throws CheckpointError.
std::filesystem::path save_checkpoint(
    const std::filesystem::path& root, const TrainingState& state, torch::nn::Module& model,
    const torch::optim::Optimizer& optimizer, const nlohmann::json& config,
    const std::map<std::string, std::string>& extra_files = {},
    const std::function<void(const std::filesystem::path&)>& after_tensors = {});

// model.safetensors (every parameter) or, with `adapter_only`, adapter.safetensors (those that require
// gradients), and optimizer.safetensors of `model` and `optimizer` in `dir` (also used by forensics, which
// keeps every parameter). save_checkpoint writes adapter_only exactly when state.base is set.
void write_training_tensors(const std::filesystem::path& dir, torch::nn::Module& model,
                            const torch::optim::Optimizer& optimizer, int64_t step,
                            bool adapter_only = false);

// A verified checkpoint directory with its config and state parsed; no tensor has been read.
struct CheckpointInfo {
  std::filesystem::path dir;
  nlohmann::json config;
  TrainingState state;
  nlohmann::json files;  // manifest.json's "files" as verified: name -> {"size", "sha256"}
};
CheckpointInfo read_checkpoint(const std::filesystem::path& dir);

// The SHA-256 of the checkpoint's weights file as its manifest lists it: adapter.safetensors for an
// adapter checkpoint, model.safetensors for a whole one ("" when the manifest lacks it).
std::string weights_sha256(const CheckpointInfo& checkpoint);

// The base of adapter checkpoint `checkpoint` (state.base set), read and verified: refused by name when it
// is gone, does not verify, or its model.safetensors is no longer the one the adapters were trained on.
// Throws CheckpointError.
CheckpointInfo read_base_checkpoint(const CheckpointInfo& checkpoint);

// Which checkpoint `ref` means for a run folder: "" = the newest valid one, digits = that step, anything
// else = a checkpoint directory path. Throws CheckpointError when there is none or it does not exist.
std::filesystem::path find_checkpoint(const std::filesystem::path& run_dir, const std::string& ref);

// Copies the stored parameters into `model`; every name must be present once with the same shape and
// dtype (a model of another shape is refused, never partially loaded). Throws CheckpointError.
// `after_read` as read_safetensors_into's (io/safetensors.h): called with each parameter's name once loaded.
void load_model_weights(const std::filesystem::path& dir, torch::nn::Module& model,
                        const TensorRead& after_read = {});
// The same for a checkpoint read by read_checkpoint: an adapter checkpoint's parameters come from its
// adapter file and its base's model file together (the base verified first, and refused by name when its
// model.safetensors is no longer the one the run started from); a full checkpoint's from its own.
void load_model_weights(const CheckpointInfo& checkpoint, torch::nn::Module& model,
                        const TensorRead& after_read = {});
// A full checkpoint's weights into the parameters of `model` that require no gradient (the first step of
// an adapter run on it: the adapters keep their fresh init); the file must hold exactly those.
void load_frozen_weights(const std::filesystem::path& dir, torch::nn::Module& model,
                         const TensorRead& after_read = {});

// Restores AdamW moments and step counts for `model`'s parameters (options such as lr are not stored:
// the trainer recomputes lr from the step). Throws CheckpointError.
void load_optimizer_state(const std::filesystem::path& dir, torch::nn::Module& model,
                          torch::optim::Optimizer& optimizer);

// "section.field: <stored_name> X, requested Y" for every leaf that differs under the given top-level keys.
std::vector<std::string> config_differences(const nlohmann::json& stored, const nlohmann::json& requested,
                                            const std::vector<std::string>& keys,
                                            const std::string& stored_name = "checkpoint");

// The first difference and how many follow, for a one-line error: "model.d_model: ..., and 2 more".
std::string first_differences(const std::vector<std::string>& differences);

}  // namespace causal
