// The `causal` command line: registers the subcommands, runs the one parsed, and turns every error into
// one line on stderr and the exit code documented in docs/errors.md.
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/build_info.h"
#include "core/errors.h"

namespace {

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "%s%s\n", causal::kErrorPrefix, message.c_str());
  return code;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

int run_guarded(const std::function<int()>& command) {
  try {
    return command();
  } catch (const causal::Error& e) {
    return fail(e.exit_code(), e.what());
  } catch (const c10::Error& e) {
    return fail(causal::kExitFailure, first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return fail(causal::kExitFailure, first_line(e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "causal: train decoder-only (causal) transformers from JSON configs and see what happened inside.\n"
      "Exit codes (docs/errors.md): 0 ok, 1 unexpected failure, 2 config or usage, 3 data, 4 checkpoint,\n"
      "5 non-finite loss/gradients, 6 a data-parallel rank died or timed out, 130/143 stopped by\n"
      "SIGINT/SIGTERM after saving a checkpoint."};
  app.set_version_flag("--version", "causal 0.1 (" + causal::build_description() + ")");
  app.require_subcommand(1);

  const std::vector<causal::cli::Command> commands = {
      causal::cli::add_train_command(app),  causal::cli::add_inspect_command(app),
      causal::cli::add_eval_command(app),   causal::cli::add_generate_command(app),
      causal::cli::add_report_command(app), causal::cli::add_data_command(app),
      causal::cli::add_bench_command(app),  causal::cli::add_sweep_command(app),
      causal::cli::add_export_command(app), causal::cli::add_import_command(app)};

  // CLI11 reports an unknown command only as "A subcommand is required": name it and the commands.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const causal::cli::Command& command : commands) {
      known = known || command.app->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + command.app->get_name();
    }
    if (!known) {
      return fail(causal::kExitConfig, std::string("unknown command '") + argv[1] + "'; expected one of " +
                                           names + " (see causal --help)");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Point at the help of the deepest subcommand parsed so far.
    std::string help = "causal";
    for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
      sub = sub->get_subcommands().front();
      help += " " + sub->get_name();
    }
    return fail(causal::kExitConfig, std::string(e.what()) + " (see " + help + " --help)");
  }
  for (const causal::cli::Command& command : commands) {
    if (command.app->parsed()) {
      const int code = run_guarded(command.run);
      // Everything causal opened is closed by now; what remains are the static destructors of the ~290
      // libraries LibTorch loads, 0.1 s of a short run's wall time (docs/bench.md).
      spdlog::shutdown();
      std::fflush(nullptr);
      std::_Exit(code);
    }
  }
  return causal::kExitOk;
}
