// `causal inspect`: a model config -> parameter counts, FLOPs, KV cache and memory plan.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/inspect.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "data/token_file.h"

namespace causal::cli {
namespace {

struct InspectFlags {
  std::string config, run;
  std::vector<std::string> overrides;
  int64_t context = 0, batch = 1;
  std::string dtype = "fp32";
  bool json = false;
};

int run_inspect(const InspectFlags& flags) {
  if (flags.config.empty() && flags.run.empty()) throw UsageError("inspect: --config or --run is required");
  const std::string source = flags.run.empty() ? flags.config : flags.run + "/config.json";
  const RunConfig config = load_config(source, flags.overrides, ConfigScope::kModel, train_vocab_size);
  const int64_t t = flags.context > 0 ? flags.context : config.model.max_seq_len;
  const InspectReport report = inspect_model(config.model, t, flags.batch, flags.dtype, config.train.lora);
  std::cout << (flags.json ? inspect_to_json(report).dump(2) : format_inspect(report)) << "\n";
  return kExitOk;
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "Parameters per component, FLOPs per token, KV-cache bytes and a memory plan for a model config "
      "(only its `model` section is needed), by the formulas in docs/background.md; nothing is allocated. "
      "With train.lora.rank set (in the config or --set train.lora.rank=16) the plan is LoRA's: the "
      "adapters train, the rest is frozen (docs/finetune.md).");
  CLI::Option* config = inspect->add_option("--config", flags->config,
                                            "Config file; a file with only a `model` section is enough");
  inspect->add_option("--run", flags->run, "A run folder: inspect the model of its config.json")
      ->excludes(config);
  inspect->add_option("--set", flags->overrides, kSetHelp);
  inspect
      ->add_option("--context", flags->context,
                   "Context length T for FLOPs and KV cache (default: model.max_seq_len)")
      ->check(at_least(0));
  inspect->add_option("--batch", flags->batch, "Sequences in the KV cache and memory plan")
      ->check(at_least(1));
  inspect->add_option("--dtype", flags->dtype, "Storage type of parameters, gradients and KV cache")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  inspect->add_flag("--json", flags->json, "Print the same figures as one JSON object");
  return {inspect, [flags] { return run_inspect(*flags); }};
}

}  // namespace causal::cli
