// Speed variants of a config, timed in alternating rounds (see bench_suggest.h).
#include "bench/bench_suggest.h"

#include <spdlog/fmt/fmt.h>

#include <exception>
#include <vector>

namespace causal {

std::string SpeedVariant::label() const {
  if (overrides.empty()) return "as written";
  std::string text;
  for (const std::string& o : overrides) text += (text.empty() ? "" : " ") + o;
  return text;
}

std::vector<SpeedVariant> speed_variants(const RunConfig& config) {
  std::vector<SpeedVariant> variants{SpeedVariant{}};
  for (AttentionKind attention :
       {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kQueryBlocks}) {
    for (AutocastKind autocast : {AutocastKind::kOff, AutocastKind::kBf16}) {
      if (attention == config.model.attention && autocast == config.model.autocast) continue;
      SpeedVariant variant;
      if (attention != config.model.attention)
        variant.overrides.push_back("model.attention=" + to_string(attention));
      if (autocast != config.model.autocast)
        variant.overrides.push_back("model.autocast=" + to_string(autocast));
      variant.changes_precision = autocast != AutocastKind::kOff;
      variants.push_back(variant);
    }
  }
  return variants;
}

size_t pick_suggestion(const std::vector<VariantResult>& results, double min_gain) {
  if (results.empty() || results[0].tokens_per_s.empty() || results[0].median <= 0.0) return 0;
  size_t best = 0;
  for (size_t i = 1; i < results.size(); ++i) {
    if (!results[i].tokens_per_s.empty() && results[i].median > results[best].median) best = i;
  }
  return results[best].median >= min_gain * results[0].median ? best : 0;
}

Suggestion suggest_speed(const RunConfig& config,
                         const std::function<RunConfig(const std::vector<std::string>&)>& load,
                         const SuggestOptions& options,
                         const std::function<void(const std::string&)>& progress) {
  Suggestion suggestion;
  std::vector<RunConfig> configs;
  for (const SpeedVariant& variant : speed_variants(config)) {
    VariantResult result{variant, {}, "", 0.0};
    if (variant.overrides.empty()) {
      configs.push_back(config);
    } else {
      try {
        configs.push_back(load(variant.overrides));
      } catch (const std::exception& error) {
        result.error = error.what();  // a variant the config's other settings rule out
        configs.push_back(config);
      }
    }
    suggestion.results.push_back(result);
  }
  BenchOptions bench = options.bench;
  bench.measure_peak = false;  // tokens/s decide; the peak would cost each run a second or more
  const size_t n = suggestion.results.size();
  for (int64_t round = 0; round < options.rounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % n;
      VariantResult& result = suggestion.results[i];
      if (!result.error.empty()) continue;
      progress("round " + std::to_string(round + 1) + "/" + std::to_string(options.rounds) + ": " +
               result.variant.label());
      try {
        result.tokens_per_s.push_back(run_bench(configs[i], bench).tokens_per_s);
      } catch (const std::exception& error) {
        if (i == 0) throw;
        result.error = error.what();
        result.tokens_per_s.clear();
      }
    }
  }
  for (VariantResult& result : suggestion.results) {
    if (!result.tokens_per_s.empty()) result.median = median(result.tokens_per_s);
  }
  suggestion.best = pick_suggestion(suggestion.results, options.min_gain);
  suggestion.gain = suggestion.results[suggestion.best].median / suggestion.results[0].median;
  suggestion.min_gain = options.min_gain;
  return suggestion;
}

nlohmann::json Suggestion::to_json() const {
  nlohmann::json variants = nlohmann::json::array();
  for (const VariantResult& r : results) {
    nlohmann::json entry{{"overrides", r.variant.overrides},
                         {"changes_precision", r.variant.changes_precision},
                         {"tokens_per_s", r.tokens_per_s}};
    if (r.error.empty()) {
      entry["median_tokens_per_s"] = r.median;
      entry["ratio"] = r.median / results[0].median;
    } else {
      entry["error"] = r.error;
    }
    variants.push_back(entry);
  }
  return {{"variants", variants},
          {"suggested", {{"overrides", results[best].variant.overrides}, {"ratio", gain}}}};
}

std::string format_suggestion(const Suggestion& suggestion) {
  std::string text = "tokens/s, median of the rounds (ratio to the config as written):\n";
  for (const VariantResult& r : suggestion.results) {
    text += r.error.empty() ? fmt::format("  {:<52} {:10.0f}   {:.2f}x\n", r.variant.label(), r.median,
                                          r.median / suggestion.results[0].median)
                            : fmt::format("  {:<52} failed: {}\n", r.variant.label(), r.error);
  }
  const VariantResult& best = suggestion.results[suggestion.best];
  if (suggestion.best == 0) {
    return text + fmt::format("suggestion: keep the config as written (no variant reached {:.2f}x)\n",
                              suggestion.min_gain);
  }
  text += "suggestion:";
  for (const std::string& o : best.variant.overrides) text += " --set " + o;
  text += fmt::format("   ({:.2f}x tokens/s)\n", suggestion.gain);
  if (best.variant.changes_precision) {
    text +=
        "  bf16 products round differently from float32: train both for a few hundred steps and compare "
        "the validation loss before keeping it (docs/bench.md)\n";
  }
  return text;
}

}  // namespace causal
