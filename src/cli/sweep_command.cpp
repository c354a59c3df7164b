// `causal sweep`: a sweep file and/or flags -> the grid's points, run as child processes, and the
// summary files (csv, json, html) rewritten after every point.
#include <CLI/CLI.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "cli/common.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "data/token_file.h"
#include "io/run_files.h"
#include "review/report.h"
#include "review/svg_chart.h"
#include "sweep/sweep.h"
#include "sweep/sweep_page.h"
#include "sweep/sweep_summary.h"

namespace causal::cli {
namespace {
namespace fs = std::filesystem;

struct SweepFlags {
  std::string sweep_file;
  std::string config;
  std::vector<std::string> grid;
  std::vector<std::string> overrides;
  std::string out, metric, group_by;
  int64_t jobs = 1;
};

SweepSpec spec_from(const SweepFlags& flags) {
  SweepSpec spec = flags.sweep_file.empty() ? SweepSpec{} : load_sweep_file(flags.sweep_file);
  if (!flags.config.empty()) spec.config = flags.config;
  for (const std::string& g : flags.grid) apply_grid_flag(spec, g);
  // After the file's: a later --set of the same field wins.
  spec.set.insert(spec.set.end(), flags.overrides.begin(), flags.overrides.end());
  if (!flags.out.empty()) spec.out = flags.out;
  if (!flags.metric.empty()) spec.metric = flags.metric;
  if (!flags.group_by.empty()) spec.group_by = flags.group_by;
  if (spec.config.empty()) throw UsageError("sweep: --config or --sweep is required");
  finish_sweep_spec(spec, load_config(spec.config, spec.set, ConfigScope::kRun, train_vocab_size).name);
  return spec;
}

// The groups' metric, as the end of the sweep prints it.
void print_groups(const SweepSummary& s) {
  std::printf("%-40s %3s  %s\n", "group", "n", (s.metric + " (mean +- std)").c_str());
  for (const SummaryGroup& g : s.groups) {
    std::string name;
    for (const auto& [key, value] : g.values)
      name += (name.empty() ? "" : ",") + key + "=" +
              (value.is_string() ? value.get<std::string>() : value.dump());
    const auto mean = g.mean.find(s.metric);
    std::string figure = "-";
    if (mean != g.mean.end()) {
      figure = svg::format_number(mean->second);
      const double sd = g.std.at(s.metric);
      if (std::isfinite(sd)) figure += " +- " + svg::format_number(sd);
    }
    const size_t n = g.count.count(s.metric) ? g.count.at(s.metric) : 0;
    std::printf("%-40s %3zu  %s\n", name.empty() ? "(all points)" : name.c_str(), n, figure.c_str());
  }
  std::fflush(stdout);
}

int run_sweep_command(const SweepFlags& flags) {
  const SweepSpec spec = spec_from(flags);
  const std::vector<SweepPoint> points = grid_points(spec);
  const std::vector<RunConfig> configs = resolve_points(spec, points);  // every point checked up front

  SweepOptions options;
  options.jobs = flags.jobs;
  options.progress = &std::cout;
  std::set<std::string> reported;  // points whose report.html this sweep has written
  SweepSummary summary;
  const SweepObserver observer = [&](const std::vector<PointResult>& results) {
    for (const PointResult& p : results) {
      const bool done = p.state == PointState::kFinished || p.state == PointState::kSkipped;
      if (!done || reported.count(p.point.name)) continue;
      reported.insert(p.point.name);
      if (p.state == PointState::kSkipped && fs::exists(fs::path(p.run_dir) / run_files::kReport)) continue;
      try {
        write_report(p.run_dir);
      } catch (const Error& e) {  // the summary links to results.json instead
        std::cerr << "causal: warning: sweep point " << p.point.name << ": no report: " << e.what() << "\n";
      }
    }
    summary = summarize_sweep(spec, results);
    write_summary_files(spec.out, summary);
    write_sweep_page(summary, spec, spec.out);
  };
  const SweepOutcome outcome = run_sweep(spec, points, configs, options, observer);

  std::cout << "sweep " << spec.out << ": " << outcome.points.size() << " points; summary "
            << (fs::path(spec.out) / "summary.html").string() << "\n";
  print_groups(summary);
  if (outcome.signal != 0) {
    const std::string name = outcome.signal == SIGINT ? "SIGINT" : "SIGTERM";
    throw InterruptedRun(name + ": sweep stopped; run the same command to continue it", 128 + outcome.signal);
  }
  if (outcome.failed() > 0) {
    std::string names;
    for (const PointResult& p : outcome.points) {
      if (p.state == PointState::kFailed)
        names += (names.empty() ? "" : ", ") + p.point.name + " (exit " + std::to_string(p.exit_code) + ")";
    }
    throw SweepPointsFailed("sweep: " + std::to_string(outcome.failed()) + " of " +
                            std::to_string(outcome.points.size()) + " points failed: " + names +
                            "; their errors are in " + (fs::path(spec.out) / "summary.csv").string());
  }
  return kExitOk;
}

}  // namespace

Command add_sweep_command(CLI::App& app) {
  auto flags = std::make_shared<SweepFlags>();
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Train every point of a grid of config values, each as its own `causal train` process in an ordinary "
      "run folder OUT/<point> (e.g. OUT/position=rope,seed=2); rerun to continue (finished points are "
      "skipped, interrupted ones resume from their checkpoint). Writes OUT/sweep.json, summary.csv, "
      "summary.json and summary.html (mean +- std over seeds). Exit 1 if a point failed. See docs/sweep.md.");
  sweep->add_option(
      "--sweep", flags->sweep_file,
      "Sweep file (JSON): {\"config\", \"grid\", \"set\", \"metric\", \"group_by\", \"out\"}; its "
      "config path is relative to the file. Flags add to or override it");
  sweep->add_option("--config", flags->config, "Base config file (required without --sweep)");
  sweep->add_option(
      "--grid", flags->grid,
      "A varied field and its values, comma-separated: --grid model.position=none,learned,rope "
      "--grid seed=1,2,3. Repeatable; the points are the product (first key slowest); a key the "
      "sweep file has is replaced");
  sweep->add_option("--set", flags->overrides, std::string(kSetHelp) + ". Applied to every point");
  sweep
      ->add_option("--jobs", flags->jobs,
                   "Points trained at once; a point whose config leaves threads at 0 gets cores / jobs")
      ->capture_default_str()
      ->check(at_least(1));
  sweep->add_option("--out", flags->out,
                    "Sweep folder. Default: the sweep file's out, else runs/<name>-sweep");
  sweep->add_option(
      "--metric", flags->metric,
      "results.json field (dotted for nested ones) charted and averaged. Default: the sweep file's, "
      "else the first numeric field");
  sweep->add_option("--group-by", flags->group_by,
                    "Grid key on the chart's x axis. Default: the first grid key");
  return {sweep, [flags] { return run_sweep_command(*flags); }};
}

}  // namespace causal::cli
