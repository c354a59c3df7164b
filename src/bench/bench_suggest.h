// `causal bench --suggest`: the config as written against the speed settings that keep its model, each
// timed in alternating rounds, and the fastest one recommended only when it pays (docs/bench.md).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "config/config.h"

namespace causal {

// A variant of the config: the overrides that make it, as a user would pass them to --set.
struct SpeedVariant {
  std::vector<std::string> overrides;  // empty: the config as written
  bool changes_precision = false;      // bf16 products: the loss must be checked, not only the speed

  std::string label() const;  // "as written" or the overrides joined by spaces
};

// The config as written first, then every other combination of attention kernel (reference, sdpa,
// query_blocks) and
// products dtype (float32, bf16) the config can take; nothing that changes the model or the data.
std::vector<SpeedVariant> speed_variants(const RunConfig& config);

struct SuggestOptions {
  BenchOptions bench{/*steps=*/10, /*warmup=*/3};
  int64_t rounds = 2;      // alternating rounds: variant k starts round r at position (k + r) % n
  double min_gain = 1.05;  // below this the difference is within what two runs on one machine differ by
};

struct VariantResult {
  SpeedVariant variant;
  std::vector<double> tokens_per_s;  // one per round; empty when the variant failed
  std::string error;                 // why it failed (for example bf16 on a device without it)
  double median = 0.0;
};

struct Suggestion {
  std::vector<VariantResult> results;  // in speed_variants' order, results[0] the config as written
  size_t best = 0;                     // index into results; 0 when nothing pays
  double gain = 1.0;                   // results[best].median / results[0].median
  double min_gain = 1.0;               // the options' threshold, for the printout

  nlohmann::json to_json() const;
};

// The fastest variant whose median reaches min_gain x the first's; 0 when none does or the first failed.
size_t pick_suggestion(const std::vector<VariantResult>& results, double min_gain);

// Times every variant (load(overrides) resolves it the way --set would) and picks one. progress gets a
// line per timed run. Throws what run_bench throws for the config as written; a variant's failure is
// recorded in its result instead.
Suggestion suggest_speed(const RunConfig& config,
                         const std::function<RunConfig(const std::vector<std::string>&)>& load,
                         const SuggestOptions& options,
                         const std::function<void(const std::string&)>& progress);

std::string format_suggestion(const Suggestion& suggestion);

}  // namespace causal
