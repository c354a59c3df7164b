// `causal eval`: a checkpoint on its task's held-out split, with the optional probes.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/errors.h"
#include "review/checkpoint_eval.h"
#include "review/eval_records.h"

namespace causal::cli {
namespace {

int run_eval(const EvalRequest& request, const std::vector<std::string>& adapters) {
  const std::vector<EvalOutcome> outcomes = evaluate_each_adapter(request, adapters);
  std::vector<EvalRecord> compared;
  for (const EvalOutcome& outcome : outcomes) {
    std::cout << outcome.table << "written to " << outcome.file << "\n";
    compared.push_back(eval_record(std::filesystem::path(outcome.file).filename().string(), outcome.figures));
  }
  // Several adapters: their headline figures side by side, one row each.
  if (outcomes.size() > 1) std::cout << "adapters compared\n" << format_eval_records(compared);
  return kExitOk;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto request = std::make_shared<EvalRequest>();
  auto adapters = std::make_shared<std::vector<std::string>>();
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on its task's held-out split: text -> loss, perplexity, bits per byte on "
      "data.val; retrieval -> the controls table on the test split (docs/retrieval-lab.md). Writes "
      "RUN/eval/step_N.json and prints a table. Text with --tasks: multiple-choice benchmarks instead "
      "(acc, acc_norm, 95% intervals; docs/checkpoints.md#benchmarks), written to "
      "RUN/eval/step_N.tasks-<hash>.json.");
  add_checkpoint_options(*eval, request->run_dir, request->checkpoint);
  eval->add_option("--adapter", *adapters,
                   std::string(kAdapterHelp) +
                       ". Repeat to evaluate several in turn on the same checkpoint (e.g. --adapter none "
                       "--adapter runs/tuneA --adapter runs/tuneB): one block each, then one row per adapter "
                       "labelled run@step; each figure file records its adapter (docs/finetune.md)");
  eval->add_option(
          "--split", request->split,
          "text: val; retrieval: test (the default) or val (its validation split); default: the task's")
      ->check(CLI::IsMember({"val", "test"}));
  eval->add_option("--set", request->overrides,
                   "Override data.* (e.g. data.val=other.tok, data.layout=padded), device, threads, or the "
                   "evaluation-time model fields model.max_seq_len, model.attention, model.attention_block, "
                   "model.autocast, "
                   "model.rope.{scaling,factor,original_max_seq_len,beta_fast,beta_slow}; other model fields "
                   "are refused. Results then go to step_N.<split>-<hash>.json");
  eval->add_option("--lengths", request->lengths,
                   "Retrieval: context lengths in records (a row is length + 1 positions), e.g. 4,8,16; "
                   "prints accuracy per length (as data.eval_pairs)")
      ->delimiter(',');
  eval->add_flag("--difficulty", request->difficulty,
                 "Retrieval: score the difficulty grid (context length x distractors x evidence position; "
                 "--lengths, --distractors, --depths, --rows) and write step_N.difficulty-<hash>.json");
  eval->add_option("--distractors", request->distractors, "--difficulty: distractor counts, e.g. 0,1,3")
      ->delimiter(',');
  eval->add_option(
          "--depths", request->depths,
          "--difficulty: evidence depths in [0,1] (index = round(depth x (length - 1))), e.g. 0,0.5,1")
      ->delimiter(',');
  eval->add_option("--rows", request->difficulty_rows, "--difficulty: rows per cell (default 128)")
      ->check(at_least(1));
  eval->add_option("--tasks", request->tasks,
                   "Text: a multiple-choice benchmark file (JSONL; HellaSwag's ctx/endings/label or "
                   "context/choices/answer), scored with the run's tokenizer as lm-eval-harness scores it; "
                   "repeat for several, e.g. --tasks data/benchmarks/brown-next-sentence.jsonl");
  eval->add_flag("--attention", request->attention,
                 "Add attention maps of the first example (per layer and head) and each head's attention "
                 "entropy (where a head reads, not what matters: see docs/diagnostics.md)");
  eval->add_flag("--ablate-heads", request->ablate_heads,
                 "Zero each head's output in turn and report the change in loss and accuracy");
  eval->add_option("--probe-batches", request->probe_batches,
                   "Text runs: validation batches the probes use (retrieval uses the whole test split)")
      ->capture_default_str()
      ->check(at_least(1));
  return {eval, [request, adapters] { return run_eval(*request, *adapters); }};
}

}  // namespace causal::cli
