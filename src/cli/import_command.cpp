// `causal import`: a GGUF file or an HF folder -> a run folder with a step-0 checkpoint.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/errors.h"
#include "interop/gguf_import.h"
#include "interop/hf_import.h"
#include "interop/run_import.h"

namespace causal::cli {
namespace {

struct ImportFlags {
  std::string format;
  std::string input;
  ImportRequest request;
};

int run_import(const ImportFlags& flags) {
  const InteropModel model = flags.format == "gguf" ? import_gguf(flags.input) : import_hf(flags.input);
  const std::string checkpoint = import_run(model, flags.input, flags.request);
  const bool named = std::any_of(flags.request.overrides.begin(), flags.request.overrides.end(),
                                 [](const std::string& o) { return o.rfind("data.train=", 0) == 0; }) ||
                     !flags.request.config.empty();
  std::cout << "imported " << flags.input << " into " << flags.request.out << " (checkpoint " << checkpoint
            << ")";
  if (model.tokenizer) std::cout << ", tokenizer " << model.tokenizer->info.describe();
  std::cout << "\ncontinue with: causal train --run-dir " << flags.request.out << " --resume auto"
            << (named ? "" : " --set data.train=TRAIN.tok --set data.val=VAL.tok")
            << " --set train.steps=N\n";
  return kExitOk;
}

}  // namespace

Command add_import_command(CLI::App& app) {
  auto flags = std::make_shared<ImportFlags>();
  CLI::App* command = app.add_subcommand(
      "import",
      "Build a run folder from a GGUF file (llama, qwen2 or gpt2; F32/F16/BF16 or quantized, dequantized to "
      "float32) or an HF folder (LlamaForCausalLM, Qwen2ForCausalLM or GPT2LMHeadModel): config.json, the "
      "tokenizer and a step-0 checkpoint that eval, generate, export and train --resume use "
      "(docs/export.md). Text data may be named now (--set data.train=... --set data.val=...) or when "
      "training; a file whose tokenizer causal cannot rebuild needs it now");
  command->add_option("--format", flags->format, "gguf or hf")
      ->required()
      ->check(CLI::IsMember({"gguf", "hf"}));
  command->add_option("--input", flags->input, "GGUF file or HF folder")->required();
  command->add_option("--out", flags->request.out, "Run folder to create (empty or absent)")->required();
  command->add_option(
      "--config", flags->request.config,
      "Base config for everything but the model (data, train, seed, name); default: text data");
  command->add_option("--set", flags->request.overrides, kSetHelp);
  command
      ->add_option("--dtype", flags->request.dtype,
                   "Precision of the imported weights: f32 (exact), or bf16/f16 (rounded to it)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  return {command, [flags] { return run_import(*flags); }};
}

}  // namespace causal::cli
