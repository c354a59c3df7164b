// `causal bench`: a config's training step, timed; see docs/bench.md.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "run/bench.h"

namespace causal::cli {
namespace {

struct BenchFlags {
  std::string config;
  std::vector<std::string> overrides;
  BenchOptions options;
  bool json = false;
};

int run_bench_command(const BenchFlags& flags) {
  const RunConfig config = load_config(flags.config, flags.overrides);
  const BenchResult result = run_bench(config, flags.options);
  std::cout << (flags.json ? result.to_json().dump() + "\n" : format_bench(result, config)) << std::flush;
  return kExitOk;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Time a config's training step (the same model, batches and AdamW step as `train`, nothing written): "
      "median ms/step, tokens/s, forward/backward/optimizer ms, achieved GFLOP/s and MFU against a matmul "
      "peak "
      "measured in this process, peak memory. See docs/bench.md.");
  bench->add_option("--config", flags->config, "Config file (docs/config.md)")->required();
  bench->add_option("--set", flags->overrides, kSetHelp);
  bench->add_option("--steps", flags->options.steps, "Timed steps")
      ->capture_default_str()
      ->check(at_least(1));
  bench->add_option("--warmup", flags->options.warmup, "Untimed steps before them")
      ->capture_default_str()
      ->check(at_least(0));
  bench->add_flag(
      "--json", flags->json,
      "Print one JSON object with exactly the keys tokens_per_s, ms_per_step, forward_ms, backward_ms, "
      "optimizer_ms, achieved_gflops, matmul_peak_gflops, mfu, peak_rss_mib, threads");
  return {bench, [flags] { return run_bench_command(*flags); }};
}

}  // namespace causal::cli
