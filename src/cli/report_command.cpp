// `causal report`: the run folder's report.html.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/errors.h"
#include "review/report.h"

namespace causal::cli {

Command add_report_command(CLI::App& app) {
  auto run_dir = std::make_shared<std::string>();
  CLI::App* report = app.add_subcommand(
      "report",
      "Write RUN/report.html: one self-contained page (inline SVG and CSS, no script, nothing fetched) with "
      "the config, results, training curves, retrieval controls, every evaluation with the adapters behind "
      "its figures (also printed) and attention heatmaps of the newest valid checkpoint. Works while the run "
      "is still training; see docs/report.md.");
  report->add_option("--run", *run_dir, "Run folder (holds config.json and metrics.jsonl)")->required();
  return {report, [run_dir] {
            const std::string written = write_report(*run_dir);  // before printing: it may throw
            std::cout << render_summary(*run_dir) << "written to " << written << "\n";
            return kExitOk;
          }};
}

}  // namespace causal::cli
