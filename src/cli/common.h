// Helpers shared by the subcommands: flag validators, help texts and options several commands take.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace causal::cli {

// A whole number >= min. CLI11's PositiveNumber reads "Value 0 not in range 0.000000 to 1797...": this one
// says "--top-k: expected an integer >= 0, got -3".
CLI::Validator at_least(int64_t min);

// Help for --set, shared by the commands that take it.
extern const char* const kSetHelp;

// Help for --adapter, shared by eval and generate.
extern const char* const kAdapterHelp;

// --run and --checkpoint, shared by the commands that read a checkpoint.
void add_checkpoint_options(CLI::App& command, std::string& run_dir, std::string& checkpoint);

}  // namespace causal::cli
