// `causal eval`: scores a checkpoint on a whole split and records the figures in the run folder.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "review/adapter_choice.h"

namespace causal {

struct EvalRequest {
  std::string run_dir;                 // run folder holding checkpoints/
  std::string checkpoint;              // "" newest valid, a step number, or a checkpoint directory
  std::string split;                   // "" = the task's held-out split: "val" (text), "test" (retrieval);
                                       // retrieval also takes "val" (its validation split)
  std::vector<std::string> overrides;  // data.*, device, threads (load_checkpoint_model)
  bool attention = false;              // add attention maps (first example) and per-head entropy (probes.h)
  bool ablate_heads = false;           // add the loss/accuracy change of zeroing each head in turn
  int64_t probe_batches = 8;     // text: evaluation batches the probes use (retrieval: the whole test split)
  std::vector<int64_t> lengths;  // retrieval: context lengths (records) to score, as data.eval_pairs
  bool difficulty = false;       // retrieval: score the difficulty grid instead (see below)
  std::vector<int64_t> distractors;  // difficulty: distractor counts; empty = DifficultySpec's
  std::vector<double> depths;        // difficulty: evidence depths in [0, 1]; empty = DifficultySpec's
  int64_t difficulty_rows = 0;       // difficulty: rows per cell; 0 = DifficultySpec's
  std::vector<std::string> tasks;    // text: multiple-choice benchmark files (JSONL) to score instead
  std::string adapter;  // --adapter (review/adapter_choice.h): "" as trained, "none", or a LoRA run's path
};

struct EvalOutcome {
  nlohmann::json figures;   // written to `file`: top-level "loss" (+ perplexity, bits_per_byte for text)
  std::string file;         // run_dir/eval/step_N.json, or step_N.<split>-<hash of overrides>.json with --set
  std::string table;        // human-readable
  AdapterIdentity adapter;  // the adapters behind the figures (an empty label: a whole model as it is)
};

// Text: loss, perplexity and bits per byte over every row of data.val (only that file is opened).
// Retrieval: the full controls table on the test split (or "val"); with `lengths`, accuracy per context
// length too; with `difficulty`, only the difficulty grid (length x distractors x evidence position),
// written to step_N.difficulty-<hash>.json. Text with `tasks`: only those benchmarks (acc, acc_norm, their
// 95% intervals and every item's choice log-probabilities), written to step_N.tasks-<hash>.json.
// The figures record the adapters behind them ("adapter": AdapterIdentity::to_json, null for a whole
// checkpoint as it is); weights other than the checkpoint's own (another run's adapters, or the base alone
// of an adapter checkpoint) add the adapter to the file name's hash, so they never replace its own.
// Throws CheckpointError, ConfigError, DataError, UsageError.
EvalOutcome evaluate_checkpoint(const EvalRequest& request);

// evaluate_checkpoint of each of `adapters` in turn (request.adapter ignored; none: the checkpoint as
// trained). Several are evaluated on the one checkpoint `request` names, each resolved and checked against
// its base before the first is evaluated, so a refused one leaves nothing written; two that name the same
// adapters are a UsageError.
std::vector<EvalOutcome> evaluate_each_adapter(const EvalRequest& request,
                                               const std::vector<std::string>& adapters);

}  // namespace causal
