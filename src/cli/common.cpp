// Helpers shared by the subcommands.
#include "cli/common.h"

#include <CLI/CLI.hpp>

namespace causal::cli {

const char* const kSetHelp =
    "Override one config field, typed by that field: --set model.d_model=256 --set "
    "train.optimizer.lr=3e-4 --set data.kind=text. Repeatable; applied in order before validation "
    "(fields: docs/config.md)";

const char* const kAdapterHelp =
    "LoRA adapters on the checkpoint's base instead of its own weights: none = the base alone, adapters "
    "off (a no-op for a whole checkpoint); a LoRA run folder (its newest checkpoint) or an adapter "
    "checkpoint directory tuned on the same base (model.safetensors SHA-256; another base is refused, exit "
    "2). Data, device and model settings stay the --run's. Default: the checkpoint as trained";

CLI::Validator at_least(int64_t min) {
  const std::string bound = std::to_string(min);
  return CLI::Validator(
      [min, bound](std::string& text) -> std::string {
        int64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value) || value < min)
          return "expected an integer >= " + bound + ", got " + text;
        return "";
      },
      "INT >= " + bound);
}

void add_checkpoint_options(CLI::App& command, std::string& run_dir, std::string& checkpoint) {
  command.add_option("--run", run_dir, "Run folder (holds checkpoints/)")->required();
  command.add_option("--checkpoint", checkpoint,
                     "Step number or checkpoint directory (default: the newest valid checkpoint)");
}

}  // namespace causal::cli
