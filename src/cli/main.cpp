// The `causal` command line: flags -> config -> library call; every error is caught here once and turned
// into one line on stderr and the exit code of SPEC section 2.
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config_io.h"
#include "data/data_error.h"
#include "data/text_encode.h"
#include "eval/checkpoint_eval.h"
#include "eval/generate.h"
#include "eval/inspect.h"
#include "report/report.h"
#include "train/checkpoint_error.h"
#include "train/forensics.h"
#include "train/health.h"
#include "train/interrupt.h"
#include "train/run_folder.h"
#include "train/train_run.h"

namespace {

enum ExitCode : int { kOk = 0, kFailure = 1, kConfig = 2, kData = 3, kCheckpoint = 4, kNumerical = 5 };

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "causal: error: %s\n", message.c_str());
  return code;
}

// Runs a command and maps the library's typed errors to exit codes.
template <class F>
int guarded(F&& command) {
  try {
    return command();
  } catch (const causal::ConfigError& e) {
    return fail(kConfig, e.what());
  } catch (const causal::RunFolderError& e) {
    return fail(kConfig, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(kConfig, e.what());
  } catch (const causal::DataError& e) {
    return fail(kData, e.what());
  } catch (const causal::CheckpointError& e) {
    return fail(kCheckpoint, e.what());
  } catch (const causal::NonFiniteError& e) {
    return fail(kNumerical, e.what());
  } catch (const causal::InterruptedRun& e) {
    return fail(e.exit_code(), e.what());
  } catch (const std::exception& e) {
    return fail(kFailure, e.what());
  }
}

const char* kSetHelp =
    "Override one config field, typed by that field: --set model.d_model=256 --set "
    "train.optimizer.lr=3e-4 --set data.kind=text. Repeatable; applied in order before validation.";

// --run and --checkpoint, shared by the commands that read a checkpoint.
void add_checkpoint_options(CLI::App& command, std::string& run_dir, std::string& checkpoint) {
  command.add_option("--run", run_dir, "Run folder (holds checkpoints/)")->required();
  command.add_option("--checkpoint", checkpoint,
                     "Step number or checkpoint directory (default: the newest valid checkpoint)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "causal: train decoder-only (causal) transformers from JSON configs and see what happened inside.\n"
      "Exit codes: 0 ok, 2 config or usage, 3 data, 4 checkpoint, 5 non-finite loss/gradients, 130/143 "
      "stopped by SIGINT/SIGTERM after saving a checkpoint."};
  app.set_version_flag("--version", std::string("causal 0.1 (LibTorch ") + TORCH_VERSION + ")");
  app.require_subcommand(1);

  // train
  std::string config_path;
  causal::TrainRequest train_request;
  std::vector<std::string> overrides;
  bool print_config = false;
  CLI::App* train = app.add_subcommand(
      "train",
      "Train a model from a config; writes runs/NAME/ (config.json, log.txt, metrics.jsonl, results.json) "
      "and prints the results table.");
  std::string replay_bundle;
  train->add_option("--config", config_path,
                    "Config file (JSON, // comments allowed); see docs/config.md. Required unless --replay");
  train->add_option("--set", overrides, kSetHelp);
  train->add_option("--run-dir", train_request.run_dir,
                    "Run folder. With --resume auto, an existing one is continued from its newest valid "
                    "checkpoint; otherwise it must be empty or absent. Default: runs/<name> (runs/<name>-N "
                    "when that holds a finished run)");
  train
      ->add_option("--resume", train_request.resume,
                   "auto: continue from the newest valid checkpoint of the run folder (--run-dir, or "
                   "runs/<name> if that run is unfinished), else start fresh; never: always a new run; "
                   "PATH: a checkpoint directory (or run folder) to continue from, in its own run folder "
                   "or, with --run-dir, in a new one. The model/data config and seed must match it (exit 4)")
      ->capture_default_str();
  train
      ->add_option("--stop-at-step", train_request.stop_at_step,
                   "Save a checkpoint after step K and exit 0, as a preempted run would (to reproduce an "
                   "interruption exactly)")
      ->check(CLI::PositiveNumber);
  train->add_option(
      "--inject-fault", train_request.inject_fault,
      "Fault injection for drills and tests: KIND:NAME@STEP fills a weight (weight:PARAM), a "
      "sub-layer output (activation:embed|blocks.<i>.attn|blocks.<i>.ffn|final_norm|logits) or a "
      "gradient (gradient:PARAM) with NaN at that step");
  train->add_option("--replay", replay_bundle,
                    "Recompute the step saved in a forensics bundle (RUN/forensics/step_N) from its weights, "
                    "batch and RNG state, and report whether it is non-finite again (exit 5) and where");
  train->add_flag("--print-config", print_config,
                  "Print the resolved config (every default filled in) and exit");

  // inspect
  std::string inspect_config, inspect_run;
  std::vector<std::string> inspect_overrides;
  int64_t context = 0, batch = 1;
  std::string dtype = "fp32";
  bool as_json = false;
  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "Parameters per component, FLOPs per token, KV-cache bytes and a memory plan for a model config "
      "(only its `model` section is needed). Uses the seed's formulas; nothing is allocated.");
  CLI::Option* inspect_config_option = inspect->add_option(
      "--config", inspect_config, "Config file; a file with only a `model` section is enough");
  inspect->add_option("--run", inspect_run, "A run folder: inspect the model of its config.json")
      ->excludes(inspect_config_option);
  inspect->add_option("--set", inspect_overrides, kSetHelp);
  inspect
      ->add_option("--context", context,
                   "Context length T for FLOPs and KV cache (default: model.max_seq_len)")
      ->check(CLI::NonNegativeNumber);
  inspect->add_option("--batch", batch, "Sequences in the KV cache and memory plan")
      ->check(CLI::PositiveNumber);
  inspect->add_option("--dtype", dtype, "Storage type of parameters, gradients and KV cache")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  inspect->add_flag("--json", as_json, "Print the same figures as one JSON object");

  // eval
  causal::EvalRequest eval_request;
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on a whole split: text -> loss, perplexity, bits per byte on data.val; "
      "retrieval -> the controls table on the test split. Writes RUN/eval/step_N.json and prints a table.");
  add_checkpoint_options(*eval, eval_request.run_dir, eval_request.checkpoint);
  eval->add_option("--split", eval_request.split, "val (text) or test (retrieval); default: the task's")
      ->check(CLI::IsMember({"val", "test"}));
  eval->add_option("--set", eval_request.overrides,
                   "Override data.* (e.g. data.val=other.tok, data.layout=padded), device or threads; the "
                   "model must stay the trained one. Results then go to step_N.<split>-<hash>.json");
  eval->add_flag("--attention", eval_request.attention,
                 "Add attention maps of the first example (per layer and head) and each head's attention "
                 "entropy (where a head reads, not what matters: see docs/diagnostics.md)");
  eval->add_flag("--ablate-heads", eval_request.ablate_heads,
                 "Zero each head's output in turn and report the change in loss and accuracy");
  eval->add_option("--probe-batches", eval_request.probe_batches,
                   "Text runs: validation batches the probes use (retrieval uses the whole test split)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  // generate
  causal::GenerateRequest generate_request;
  CLI::App* generate = app.add_subcommand(
      "generate",
      "Sample text from a text run's checkpoint with the KV cache (RoPE/learned positions at absolute "
      "positions). Prints the prompt and its continuation.");
  add_checkpoint_options(*generate, generate_request.run_dir, generate_request.checkpoint);
  generate->add_option("--prompt", generate_request.prompt, "Prompt text (encoded as BOS + its bytes)")
      ->required();
  generate->add_option("--max-new-tokens", generate_request.max_new_tokens, "Tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  generate
      ->add_option("--temperature", generate_request.temperature, "Softmax temperature; 0 = greedy (argmax)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  generate->add_option("--top-k", generate_request.top_k, "Sample among the K likeliest tokens; 0 = all")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  generate->add_option("--seed", generate_request.seed, "Seed of the sampling generator")
      ->capture_default_str();
  generate->add_option("--set", generate_request.overrides, "Override device or threads");
  generate->add_flag("--verify-cache", generate_request.verify_cache,
                     "Recompute the full causal pass at every step and end with the line "
                     "`verify-cache max_abs_diff=<float>` (largest cached-vs-full logit difference)");

  // report
  std::string report_run;
  CLI::App* report_command = app.add_subcommand(
      "report",
      "Write RUN/report.html: one self-contained page (inline SVG and CSS, no script, nothing fetched) with "
      "the config, results, training curves, retrieval controls and attention heatmaps of the newest valid "
      "checkpoint. Works while the run is still training; see docs/report.md.");
  report_command->add_option("--run", report_run, "Run folder (holds config.json and metrics.jsonl)")
      ->required();

  // data encode / data inspect
  CLI::App* data =
      app.add_subcommand("data", "Prepare text data: encode text files into token files, inspect them");
  data->require_subcommand(1);
  causal::EncodeOptions encode_options;
  CLI::App* encode = data->add_subcommand("encode",
                                          "Text files -> a .tok token file (docs/data.md). Each input file "
                                          "is one document unless --doc-separator "
                                          "splits it; every document is stored as [BOS, ids..., EOS].");
  encode->add_option("--input", encode_options.inputs, "Text files, encoded in this order")->required();
  encode
      ->add_option("--tokenizer", encode_options.tokenizer, "Tokenizer: bytes (256 byte ids + BOS, EOS, PAD)")
      ->capture_default_str();
  encode->add_option("--out", encode_options.out, "Token file to write (training split)")->required();
  encode->add_option("--val-out", encode_options.val_out,
                     "Token file for the validation split (whole documents)");
  encode
      ->add_option("--val-fraction", encode_options.val_fraction,
                   "Share of documents written to --val-out, spread evenly over the input order")
      ->check(CLI::Range(0.0, 1.0));
  encode->add_option("--doc-separator", encode_options.doc_separator,
                     "Split inputs into documents at this string (escapes \\n \\t \\r \\\\ allowed)");
  std::string tok_path;
  CLI::App* data_inspect = data->add_subcommand(
      "inspect", "Header, document count and document length statistics of a token file");
  data_inspect->add_option("file", tok_path, "Token file (.tok)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kConfig;
  }

  if (train->parsed()) {
    return guarded([&] {
      if (!replay_bundle.empty()) {
        const causal::ReplayResult replay = causal::replay_step(replay_bundle);
        std::cout << "step " << replay.step << " as recorded: " << replay.original_message << "\n"
                  << "step " << replay.step << " replayed:    loss=" << replay.outcome.grads.loss
                  << " grad_norm=" << replay.outcome.grad_norm << " finite=" << std::boolalpha
                  << replay.outcome.finite
                  << (replay.outcome.finite ? "" : "; " + replay.outcome.nonfinite_cause) << "\n";
        return replay.outcome.finite ? kOk : kNumerical;
      }
      if (config_path.empty())
        throw std::invalid_argument("train: --config is required (or --replay BUNDLE)");
      causal::RunConfig config = causal::load_config(config_path, overrides);
      if (print_config) {
        std::cout << causal::config_to_string(config) << "\n";
        return kOk;
      }
      const nlohmann::json outcome = causal::train_run(config, train_request);
      if (outcome.contains("stopped_at_step")) {
        std::cout << "stopped after step " << outcome["stopped_at_step"] << "; checkpoint "
                  << outcome["checkpoint"].get<std::string>() << "\n";
      }
      return kOk;
    });
  }
  if (inspect->parsed()) {
    return guarded([&] {
      if (inspect_config.empty() && inspect_run.empty())
        throw std::invalid_argument("inspect: --config or --run is required");
      const std::string source = inspect_run.empty() ? inspect_config : inspect_run + "/config.json";
      causal::RunConfig config = causal::load_config(source, inspect_overrides, causal::ConfigScope::kModel);
      const int64_t t = context > 0 ? context : config.model.max_seq_len;
      causal::InspectReport report = causal::inspect_model(config.model, t, batch, dtype);
      std::cout << (as_json ? causal::inspect_to_json(report).dump(2) : causal::format_inspect(report))
                << "\n";
      return kOk;
    });
  }
  if (eval->parsed()) {
    return guarded([&] {
      const causal::EvalOutcome outcome = causal::evaluate_checkpoint(eval_request);
      std::cout << outcome.table << "written to " << outcome.file << "\n";
      return kOk;
    });
  }
  if (generate->parsed()) {
    return guarded([&] {
      const causal::GenerateResult result = causal::generate_text(generate_request);
      std::cout << generate_request.prompt << result.text << "\n";
      std::fprintf(stderr, "generated %zu tokens from checkpoint step %lld; stopped: %s\n",
                   result.generated_ids.size(), static_cast<long long>(result.step),
                   result.stop_reason.c_str());
      if (generate_request.verify_cache) std::printf("verify-cache max_abs_diff=%.9g\n", result.max_abs_diff);
      return kOk;
    });
  }
  if (report_command->parsed()) {
    return guarded([&] {
      const std::string written = causal::write_report(report_run);
      std::cout << "written to " << written << "\n";
      return kOk;
    });
  }
  if (encode->parsed()) {
    return guarded([&] {
      if (!encode_options.val_out.empty() && encode_options.val_fraction <= 0.0) {
        throw std::invalid_argument("--val-out needs --val-fraction in (0,1)");
      }
      std::cout << causal::encode_text_files(encode_options) << std::flush;
      return kOk;
    });
  }
  if (data_inspect->parsed()) {
    return guarded([&] {
      std::cout << causal::inspect_token_file(tok_path) << std::flush;
      return kOk;
    });
  }
  return kOk;
}
