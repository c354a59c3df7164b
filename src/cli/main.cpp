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
#include "eval/inspect.h"
#include "train/health.h"
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
  } catch (const causal::NonFiniteError& e) {
    return fail(kNumerical, e.what());
  } catch (const std::exception& e) {
    return fail(kFailure, e.what());
  }
}

const char* kSetHelp =
    "Override one config field, typed by that field: --set model.d_model=256 --set "
    "train.optimizer.lr=3e-4 --set data.kind=text. Repeatable; applied in order before validation.";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "causal: train decoder-only (causal) transformers from JSON configs and see what happened inside.\n"
      "Exit codes: 0 ok, 2 config or usage, 3 data, 4 checkpoint, 5 non-finite loss/gradients."};
  app.set_version_flag("--version", std::string("causal 0.1 (LibTorch ") + TORCH_VERSION + ")");
  app.require_subcommand(1);

  // train
  std::string config_path, run_dir;
  std::vector<std::string> overrides;
  bool print_config = false;
  CLI::App* train = app.add_subcommand(
      "train",
      "Train a model from a config; writes runs/NAME/ (config.json, log.txt, metrics.jsonl, results.json) "
      "and prints the results table.");
  train->add_option("--config", config_path, "Config file (JSON, // comments allowed); see docs/config.md")
      ->required();
  train->add_option("--set", overrides, kSetHelp);
  train->add_option("--run-dir", run_dir,
                    "Run folder to create (must be empty or absent). Default: runs/<name>, or runs/<name>-N "
                    "when that is taken");
  train->add_flag("--print-config", print_config,
                  "Print the resolved config (every default filled in) and exit");

  // inspect
  std::string inspect_config;
  std::vector<std::string> inspect_overrides;
  int64_t context = 0, batch = 1;
  std::string dtype = "fp32";
  bool as_json = false;
  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "Parameters per component, FLOPs per token, KV-cache bytes and a memory plan for a model config "
      "(only its `model` section is needed). Uses the seed's formulas; nothing is allocated.");
  inspect->add_option("--config", inspect_config, "Config file; a file with only a `model` section is enough")
      ->required();
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
      causal::RunConfig config = causal::load_config(config_path, overrides);
      if (print_config) {
        std::cout << causal::config_to_string(config) << "\n";
        return kOk;
      }
      causal::train_run(config, causal::TrainRequest{run_dir});
      return kOk;
    });
  }
  if (inspect->parsed()) {
    return guarded([&] {
      causal::RunConfig config =
          causal::load_config(inspect_config, inspect_overrides, causal::ConfigScope::kModel);
      const int64_t t = context > 0 ? context : config.model.max_seq_len;
      causal::InspectReport report = causal::inspect_model(config.model, t, batch, dtype);
      std::cout << (as_json ? causal::inspect_to_json(report).dump(2) : causal::format_inspect(report))
                << "\n";
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
