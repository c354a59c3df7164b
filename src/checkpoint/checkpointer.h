// When a run saves, what it keeps, and where it last saved: the save interval, keep-last-K pruning, and a
// guard against checkpointing a model that holds non-finite values.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"

namespace spdlog {
class logger;
}

namespace causal {

struct CheckpointerOptions {
  int64_t every = 0;  // steps between periodic saves; 0 = only the last step (and forced saves)
  int64_t keep = 3;   // newest checkpoints kept after each save (>= 1)
  // Called inside each write once the tensor files are in the temporary directory (injected save
  // faults, train/fault_injection.h); may throw, which fails that save like a real write error.
  std::function<void(const std::filesystem::path& dir, int64_t step)> during_write;
};

class Checkpointer {
 public:
  // Saves into `root` (RUN/checkpoints) the given model and optimizer with `config` (the resolved run
  // config); `last` is the checkpoint the run continues from, if any.
  Checkpointer(std::filesystem::path root, CheckpointerOptions options, torch::nn::Module& model,
               const torch::optim::Optimizer& optimizer, nlohmann::json config, spdlog::logger& log,
               std::filesystem::path last = {});

  // Saves after `step` when it is due (a multiple of `every`, or `last_step`) or `force`d (a stop
  // request); `state` is built only then. Returns whether a checkpoint was written: a model holding
  // non-finite values is never saved (logged as an error instead). Throws CheckpointError.
  bool save(int64_t step, bool last_step, const std::function<TrainingState()>& state, bool force = false);

  // Files (name -> bytes) written into every checkpoint besides the tensors and JSON (the tokenizer).
  void set_extra_files(std::map<std::string, std::string> files) { extra_files_ = std::move(files); }

  // The newest checkpoint written (or continued from); empty when there is none.
  const std::filesystem::path& last() const { return last_; }

 private:
  std::filesystem::path root_;
  CheckpointerOptions options_;
  torch::nn::Module& model_;
  const torch::optim::Optimizer& optimizer_;
  nlohmann::json config_;
  spdlog::logger& log_;
  std::filesystem::path last_;
  std::map<std::string, std::string> extra_files_;
};

}  // namespace causal
