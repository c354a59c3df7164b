// The commands that read a run's checkpoints: `causal eval`, `causal generate` and `causal report`.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/errors.h"
#include "eval/checkpoint_eval.h"
#include "eval/generate.h"
#include "report/report.h"

namespace causal::cli {
namespace {

// --run and --checkpoint, shared by the commands that read a checkpoint.
void add_checkpoint_options(CLI::App& command, std::string& run_dir, std::string& checkpoint) {
  command.add_option("--run", run_dir, "Run folder (holds checkpoints/)")->required();
  command.add_option("--checkpoint", checkpoint,
                     "Step number or checkpoint directory (default: the newest valid checkpoint)");
}

int run_eval(const EvalRequest& request) {
  const EvalOutcome outcome = evaluate_checkpoint(request);
  std::cout << outcome.table << "written to " << outcome.file << "\n";
  return kExitOk;
}

int run_generate(const GenerateRequest& request) {
  const GenerateResult result = generate_text(request);
  if (result.decoded) {
    std::cout << request.prompt << result.text << "\n";
  } else {
    // No tokenizer: the ids themselves, prompt (after BOS) and continuation.
    std::string line;
    for (size_t i = 1; i < result.prompt_ids.size(); ++i) line += std::to_string(result.prompt_ids[i]) + " ";
    line += "|";
    for (int64_t id : result.generated_ids) line += " " + std::to_string(id);
    std::cout << line << "\n";
  }
  std::fprintf(stderr, "generated %zu tokens from checkpoint step %lld; stopped: %s\n",
               result.generated_ids.size(), static_cast<long long>(result.step), result.stop_reason.c_str());
  if (request.verify_cache) std::printf("verify-cache max_abs_diff=%.9g\n", result.max_abs_diff);
  return kExitOk;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto request = std::make_shared<EvalRequest>();
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on its task's held-out split: text -> loss, perplexity, bits per byte on "
      "data.val; retrieval -> the controls table on the test split (docs/retrieval-lab.md). Writes "
      "RUN/eval/step_N.json and prints a table.");
  add_checkpoint_options(*eval, request->run_dir, request->checkpoint);
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
  eval->add_flag("--attention", request->attention,
                 "Add attention maps of the first example (per layer and head) and each head's attention "
                 "entropy (where a head reads, not what matters: see docs/diagnostics.md)");
  eval->add_flag("--ablate-heads", request->ablate_heads,
                 "Zero each head's output in turn and report the change in loss and accuracy");
  eval->add_option("--probe-batches", request->probe_batches,
                   "Text runs: validation batches the probes use (retrieval uses the whole test split)")
      ->capture_default_str()
      ->check(at_least(1));
  return {eval, [request] { return run_eval(*request); }};
}

Command add_generate_command(CLI::App& app) {
  auto request = std::make_shared<GenerateRequest>();
  CLI::App* generate = app.add_subcommand(
      "generate",
      "Sample text from a text run's checkpoint with the KV cache (RoPE/learned positions at absolute "
      "positions). Prints the prompt and its continuation.");
  add_checkpoint_options(*generate, request->run_dir, request->checkpoint);
  generate->add_option("--prompt", request->prompt, "Prompt text (encoded as BOS + its tokens)");
  generate
      ->add_option("--prompt-ids", request->prompt_ids,
                   "Prompt as ids after BOS (runs whose tokenizer is not known, e.g. imported tokens)")
      ->delimiter(',');
  generate->add_option("--tokenizer", request->tokenizer,
                       "SentencePiece .model to encode the prompt and decode with, instead of the run's");
  generate->add_option("--max-new-tokens", request->max_new_tokens, "Tokens to generate at most")
      ->capture_default_str()
      ->check(at_least(1));
  // Range checks (finite, >= 0; top-k <= vocab) are generate_text's: NaN and inf pass CLI11's checks.
  generate
      ->add_option("--temperature", request->temperature,
                   "Softmax temperature, finite, >= 0; 0 = greedy (argmax)")
      ->capture_default_str();
  generate
      ->add_option("--top-k", request->top_k,
                   "Sample among the K likeliest tokens (K <= the vocabulary); 0 = all")
      ->capture_default_str()
      ->check(at_least(0));
  generate->add_option("--seed", request->seed, "Seed of the sampling generator")->capture_default_str();
  generate->add_option("--set", request->overrides, "Override device or threads");
  generate->add_flag("--verify-cache", request->verify_cache,
                     "Recompute the full causal pass at every step and end with the line "
                     "`verify-cache max_abs_diff=<float>` (largest cached-vs-full logit difference)");
  return {generate, [request] { return run_generate(*request); }};
}

Command add_report_command(CLI::App& app) {
  auto run_dir = std::make_shared<std::string>();
  CLI::App* report = app.add_subcommand(
      "report",
      "Write RUN/report.html: one self-contained page (inline SVG and CSS, no script, nothing fetched) with "
      "the config, results, training curves, retrieval controls and attention heatmaps of the newest valid "
      "checkpoint. Works while the run is still training; see docs/report.md.");
  report->add_option("--run", *run_dir, "Run folder (holds config.json and metrics.jsonl)")->required();
  return {report, [run_dir] {
            const std::string written = write_report(*run_dir);  // before printing: it may throw
            std::cout << "written to " << written << "\n";
            return kExitOk;
          }};
}

}  // namespace causal::cli
