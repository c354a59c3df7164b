// `causal export`: a verified checkpoint -> a GGUF file (llama.cpp) or an HF folder (transformers).
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/errors.h"
#include "interop/adapter_export.h"
#include "interop/export_source.h"
#include "interop/gguf_export.h"
#include "interop/hf_export.h"
#include "interop/tensor_bytes.h"

namespace causal::cli {
namespace {

struct ExportFlags {
  std::string run_dir;
  std::string checkpoint;
  std::string format;
  std::string out;
  std::string dtype = "f32";
  bool merge = false;
};

int run_export(const ExportFlags& flags) {
  namespace fs = std::filesystem;
  if (flags.run_dir.empty() && flags.checkpoint.empty())
    throw UsageError("export: --run RUN or --checkpoint DIR is required");
  std::string run_dir = flags.run_dir;
  // A checkpoint directory alone: its run folder is the one holding checkpoints/.
  if (run_dir.empty())
    run_dir = fs::absolute(flags.checkpoint).lexically_normal().parent_path().parent_path().string();
  const GgufTensorType dtype = parse_export_dtype(flags.dtype);
  if (flags.format == "hf" && dtype == GgufTensorType::kQ8_0)
    throw UsageError("export: --dtype q8_0 is a GGUF block format; the HF layout takes f32, f16 or bf16");
  const bool adapter_format = flags.format == "gguf-lora" || flags.format == "peft";
  if (adapter_format && flags.merge)
    throw UsageError("export: --merge writes a whole model (--format gguf or hf); --format " + flags.format +
                     " writes the adapters alone");
  // The adapters are small and their consumers add them in float32: nothing to gain from rounding them.
  if (adapter_format && dtype != GgufTensorType::kF32)
    throw UsageError("export: --format " + flags.format + " writes float32 adapters; --dtype " + flags.dtype +
                     " applies to whole models");
  const auto start = std::chrono::steady_clock::now();
  const InteropModel model = load_export_source(run_dir, flags.checkpoint, flags.merge);
  const std::string& source = model.origin;
  if (flags.format == "gguf-lora") {
    write_gguf_lora(lora_adapter_of(model, flags.format), flags.out);
  } else if (flags.format == "peft") {
    write_peft_adapter(lora_adapter_of(model, flags.format), flags.out, model.base_origin);
  } else {
    check_whole_model(model, flags.format);
    if (flags.format == "gguf") {
      export_gguf(model, dtype, flags.out, source);
    } else {
      export_hf(model, dtype, flags.out, source);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uintmax_t bytes = 0;
  if (fs::is_directory(flags.out)) {
    for (const auto& entry : fs::recursive_directory_iterator(flags.out))
      if (entry.is_regular_file()) bytes += entry.file_size();
  } else {
    bytes = fs::file_size(flags.out);
  }
  std::cout << "wrote " << flags.out << " (" << flags.format << ", " << flags.dtype << ", " << bytes
            << " bytes) in " << seconds << " s\n";
  return kExitOk;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* command = app.add_subcommand(
      "export",
      "Write a checkpoint as a GGUF file for llama.cpp or an HF folder for transformers, or a LoRA "
      "checkpoint's adapters alone as a GGUF adapter (llama.cpp --lora) or a PEFT folder (docs/export.md). "
      "The manifest is verified first; the output appears whole or not at all; what the target cannot "
      "express exactly is refused (exit 2).");
  command->add_option("--run", flags->run_dir, "Run folder (default checkpoint: its newest valid one)");
  command->add_option("--checkpoint", flags->checkpoint, "Step number (with --run) or checkpoint directory");
  command
      ->add_option("--format", flags->format,
                   "gguf (llama.cpp), hf (transformers); for a LoRA checkpoint's adapters alone: gguf-lora "
                   "(llama.cpp --lora, on the base's gguf export) or peft (PeftModel.from_pretrained, on the "
                   "base's hf export)")
      ->required()
      ->check(CLI::IsMember({"gguf", "hf", "gguf-lora", "peft"}));
  command->add_option("--out", flags->out, "GGUF file, or the HF or PEFT folder to create")->required();
  command
      ->add_option("--dtype", flags->dtype,
                   "Weight precision: f32, f16, bf16, or q8_0 (GGUF only: 2-D weights in llama.cpp's 8-bit "
                   "blocks, as small as most downloaded models)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  command->add_flag("--merge", flags->merge,
                    "For a LoRA checkpoint: fold the adapters into the base (W + scale B A) and write the "
                    "whole model (docs/finetune.md)");
  return {command, [flags] { return run_export(*flags); }};
}

}  // namespace causal::cli
