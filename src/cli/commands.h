// The subcommands of `causal`: each registers its flags on the app and returns what to run when it was
// the one parsed. A command turns flags into a request for the library and prints what it returns.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace causal::cli {

struct Command {
  CLI::App* app = nullptr;   // the subcommand, to ask whether it was parsed
  std::function<int()> run;  // the exit code; library errors propagate to main
};

Command add_train_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_data_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_sweep_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_import_command(CLI::App& app);

}  // namespace causal::cli
