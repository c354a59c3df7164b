// `causal bench`: a config's training step, timed; see docs/bench.md.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>
#include <memory>

#include "bench/bench.h"
#include "bench/bench_describe.h"
#include "bench/bench_suggest.h"
#include "bench/matmul_peak.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/runtime.h"
#include "data/token_file.h"
#include "model/autocast_scope.h"

namespace causal::cli {
namespace {

struct BenchFlags {
  std::string config;
  std::vector<std::string> overrides;
  BenchOptions options;
  bool json = false;
  bool matmul_peak = false;
  bool describe = false;
  bool suggest = false;
  bool steps_given = false, warmup_given = false;  // --suggest has shorter defaults of its own
};

int run_bench_command(const BenchFlags& flags) {
  if (flags.matmul_peak) {
    // On the config's device and in its products' dtype when one is given, else float32 on the CPU.
    c10::Device device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    if (!flags.config.empty()) {
      const RunConfig config =
          load_config(flags.config, flags.overrides, ConfigScope::kRun, train_vocab_size);
      device = resolve_device(config.device);
      dtype = products_dtype(config.model.autocast);
    }
    std::cout << std::fixed << std::setprecision(1) << measure_matmul_peak(device, dtype) / 1e9 << "\n"
              << std::flush;
    return kExitOk;
  }
  if (flags.config.empty()) throw UsageError("bench: --config is required (or --matmul-peak alone)");
  const RunConfig config = load_config(flags.config, flags.overrides, ConfigScope::kRun, train_vocab_size);
  if (flags.describe) {
    std::cout << describe_bench(config).dump(2) << "\n" << std::flush;
    return kExitOk;
  }
  if (flags.suggest) {
    SuggestOptions options;
    if (flags.steps_given) options.bench.steps = flags.options.steps;
    if (flags.warmup_given) options.bench.warmup = flags.options.warmup;
    const auto load = [&flags](const std::vector<std::string>& extra) {
      std::vector<std::string> overrides = flags.overrides;
      overrides.insert(overrides.end(), extra.begin(), extra.end());
      return load_config(flags.config, overrides, ConfigScope::kRun, train_vocab_size);
    };
    const auto progress = [](const std::string& line) { std::cerr << "... " << line << "\n" << std::flush; };
    const Suggestion suggestion = suggest_speed(config, load, options, progress);
    std::cout << (flags.json ? suggestion.to_json().dump() + "\n" : format_suggestion(suggestion))
              << std::flush;
    return kExitOk;
  }
  if (flags.options.kernel_steps > 0) require_kernel_profiler();  // before any step is timed
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
  bench->add_option("--config", flags->config, "Config file (docs/config.md); required unless --matmul-peak");
  bench->add_option("--set", flags->overrides, kSetHelp);
  CLI::Option* steps = bench->add_option("--steps", flags->options.steps, "Timed steps")
                           ->capture_default_str()
                           ->check(at_least(1));
  CLI::Option* warmup = bench->add_option("--warmup", flags->options.warmup, "Untimed steps before them")
                            ->capture_default_str()
                            ->check(at_least(0));
  bench->add_flag(
      "--json", flags->json,
      "Print one JSON object with exactly the keys tokens_per_s, ms_per_step, forward_ms, backward_ms, "
      "optimizer_ms, achieved_gflops, matmul_peak_gflops, mfu, peak_rss_mib, threads (and kernels with "
      "--kernels); with --suggest, the variants and the suggestion (docs/bench.md)");
  CLI::Option* peak = bench->add_flag(
      "--matmul-peak", flags->matmul_peak,
      "Print only the measured matmul peak in GFLOP/s (on the config's device, else the CPU) and "
      "exit; export it as CAUSAL_MATMUL_PEAK_GFLOPS to spare runs started together the "
      "measurement (docs/bench.md)");
  CLI::Option* describe = bench->add_flag(
      "--describe", flags->describe,
      "Print, instead of timing, one JSON object with what bench derives from the config: "
      "sequence_length, inspect (the `inspect --json` figures at that context, FLOPs per token "
      "included), parameters (name, shape, AdamW group and its weight decay) and lr (each step's "
      "learning rate); for baselines such as tools/bench-pytorch (docs/bench.md)");
  CLI::Option* kernels =
      bench
          ->add_option(
              "--kernels", flags->options.kernel_steps,
              "After the timed steps, profile this many more with LibTorch's profiler (LibTorch 2.x) and "
              "print the time per step by kind of work and the longest items: a GPU's kernels, or on the "
              "CPU each ATen operator's self time; in the JSON as \"kernels\" (docs/bench.md#kernels)")
          ->check(at_least(1))
          ->excludes(peak)
          ->excludes(describe);
  bench
      ->add_flag("--suggest", flags->suggest,
                 "Time the config as written against its other attention kernels (reference, sdpa, "
                 "query_blocks) and "
                 "products dtypes (float32, bf16), in 2 alternating rounds of 10 timed steps after 3 "
                 "untimed ones (unless --steps and --warmup say otherwise), and print the --set lines of "
                 "the fastest when it is at least 1.05x faster; changes nothing (docs/bench.md)")
      ->excludes(peak)
      ->excludes(describe)
      ->excludes(kernels);
  return {bench, [flags, steps, warmup] {
            flags->steps_given = steps->count() > 0;
            flags->warmup_given = warmup->count() > 0;
            return run_bench_command(*flags);
          }};
}

}  // namespace causal::cli
