// `causal import`: a GGUF file or an HF folder -> a run folder with a step-0 checkpoint; a PEFT LoRA folder
// on a base run -> a run folder with a step-0 adapter checkpoint.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/errors.h"
#include "interop/gguf_import.h"
#include "interop/hf_import.h"
#include "interop/peft_import.h"
#include "interop/run_import.h"

namespace causal::cli {
namespace {

struct ImportFlags {
  std::string format;
  std::string input;
  ImportRequest request;
};

int run_peft_import(const ImportFlags& flags) {
  const std::string checkpoint = import_peft(flags.input, flags.request);
  std::cout << "imported the LoRA adapter " << flags.input << " into " << flags.request.out << " (checkpoint "
            << checkpoint << ", base " << flags.request.base << ")\n"
            << "continue with: causal train --run-dir " << flags.request.out
            << " --resume auto --set train.steps=N, or causal eval --run " << flags.request.out << "\n";
  return kExitOk;
}

int run_import(const ImportFlags& flags) {
  if (flags.format == "peft") return run_peft_import(flags);
  if (!flags.request.base.empty())
    throw UsageError("import: --base names the base run of a LoRA adapter; it goes with --format peft only");
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
      "training; a file whose tokenizer causal cannot rebuild needs it now. --format peft --base RUN: a "
      "PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) trained on RUN's --format hf "
      "export becomes a run of RUN's config with train.lora set and a step-0 adapter checkpoint on RUN's "
      "newest checkpoint, for eval, generate, export and train --resume; what train.lora cannot hold "
      "exactly is refused by name (exit 2)");
  command->add_option("--format", flags->format, "gguf, hf, or peft (a LoRA adapter on --base)")
      ->required()
      ->check(CLI::IsMember({"gguf", "hf", "peft"}));
  command->add_option("--input", flags->input, "GGUF file, HF folder or PEFT adapter folder")->required();
  command->add_option("--base", flags->request.base,
                      "With --format peft: the run folder whose newest checkpoint (a whole model) the "
                      "adapter was trained on");
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
