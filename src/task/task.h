// One workload's side of a run: where training batches come from, which positions carry loss, how a
// model is scored, and how its tokens and results read to a person. Retrieval and text implement it;
// code that differs by workload asks the task rather than data.kind, so adding a workload is one file
// (a Task subclass and its factory) plus its line in the registry (task.cpp).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/batch.h"
#include "data/batch_source.h"
#include "model/transformer.h"
#include "task/task_traits.h"

namespace causal {

// Batches a probe runs on (CPU) and a display label for each position of the first row.
struct ProbeSet {
  std::vector<Batch> batches;
  std::vector<std::string> labels;  // one per position of batches[0] row 0
};

// One example with what a person needs to read it (the report's attention heatmaps).
struct TaskExample {
  Batch batch;                      // one row (B = 1), CPU
  std::vector<std::string> labels;  // token_labels of that row
  std::string description;          // which example this is, in one line
  std::string text;                 // text tasks: the characters the positions spell; else ""
  std::optional<int64_t> answer;    // tasks with one answer per row: the true id at the last position
};

// What a task is asked to open: training needs the training data; evaluation only the held-out split
// (so `causal eval` works on a run folder whose training file is gone).
enum class TaskScope { kTraining, kEvaluation };

class Task {
 public:
  virtual ~Task() = default;

  // One line for the log: how much data, from where, and which positions carry loss.
  virtual std::string describe() const = 0;
  // What a checkpoint's data must still be for a run to continue from it (beyond the config).
  virtual nlohmann::json identity() const = 0;
  // Positions per training row (FLOPs per token depend on it).
  virtual int64_t sequence_length() const = 0;

  // Training micro-batches; only a task opened with TaskScope::kTraining has them.
  virtual BatchSource& training_batches() = 0;
  // Loss of `model` on a fixed training batch: the run's "initial_loss", measured before step one.
  virtual double initial_loss(Transformer& model) = 0;

  // Figures on the held-out split, under the keys results.json and eval metrics rows use.
  virtual nlohmann::json evaluate(Transformer& model) = 0;
  // Figures on the validation split, for periodic evaluation and any selection during training; tasks
  // whose held-out split is the validation split return evaluate().
  virtual nlohmann::json evaluate_validation(Transformer& model) { return evaluate(model); }
  // evaluate()'s figures as `causal eval` records them: top-level "loss" first, then the task's own.
  virtual nlohmann::json checkpoint_figures(const nlohmann::json& evaluation) const = 0;
  // The human-readable results table (results.json keys it knows, in a fixed order).
  virtual std::string results_table(const nlohmann::json& results) const = 0;

  // A short display label for each position of row `row` of `batch` ("k3:v5", "BOS", "␣", ...).
  virtual std::vector<std::string> token_labels(const Batch& batch, int64_t row) const = 0;
  // Held-out batches for attention and ablation probes (at most `max_batches`, task permitting).
  virtual ProbeSet probe_set(int64_t max_batches) const = 0;
  // The first held-out example, cut to at most `max_positions` where the task allows it.
  virtual TaskExample first_example(int64_t max_positions) const = 0;
  // Files (name -> bytes) written into the run folder and every checkpoint so that a run stands alone:
  // the text task's tokenizer (tokenizer.json, and tokenizer.model when it has one).
  virtual std::map<std::string, std::string> run_files() const { return {}; }
};

// Seed of the training batch order: a stream of its own, so changing the model (and so its init draws)
// leaves the batch sequence unchanged.
uint64_t batch_seed(int64_t run_seed);

// Opens and checks everything the task needs for `scope` (data files, tokenizers against the model's
// vocabulary, generated splits); throws DataError or ConfigError before anything is written.
std::unique_ptr<Task> make_task(const RunConfig& config, const c10::Device& device, TaskScope scope);

}  // namespace causal
