// bench --suggest contracts: the variants keep the model and differ from the config as written, and a
// variant is suggested only when it is the fastest and clears the margin.
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_suggest.h"

using namespace causal;

namespace {

VariantResult measured(std::vector<std::string> overrides, double tokens_per_s) {
  VariantResult r;
  r.variant.overrides = std::move(overrides);
  r.tokens_per_s = {tokens_per_s};
  r.median = tokens_per_s;
  return r;
}

}  // namespace

CATCH_TEST_CASE("suggest: the variants are the other attention and precision settings, the config first",
                "[unit][bench]") {
  RunConfig config;
  config.model.attention = AttentionKind::kFlash;
  config.model.autocast = AutocastKind::kOff;
  const std::vector<SpeedVariant> variants = speed_variants(config);
  // As written, then reference, sdpa and query_blocks, each in float32 and bf16.
  CATCH_REQUIRE(variants.size() == 7);
  CATCH_CHECK(variants[0].overrides.empty());
  CATCH_CHECK(variants[0].label() == "as written");
  std::set<std::string> labels;
  for (size_t i = 1; i < variants.size(); ++i) {
    labels.insert(variants[i].label());
    const bool bf16 = variants[i].label().find("model.autocast=bf16") != std::string::npos;
    CATCH_CHECK(variants[i].changes_precision == bf16);
  }
  CATCH_CHECK(labels == std::set<std::string>{
                            "model.attention=reference", "model.attention=reference model.autocast=bf16",
                            "model.attention=sdpa", "model.attention=sdpa model.autocast=bf16",
                            "model.attention=query_blocks",
                            "model.attention=query_blocks model.autocast=bf16"});

  config.model.attention = AttentionKind::kSdpa;
  config.model.autocast = AutocastKind::kBf16;
  const std::vector<SpeedVariant> from_bf16 = speed_variants(config);
  CATCH_REQUIRE(from_bf16.size() == 6);  // the config is one of the six combinations
  CATCH_CHECK(from_bf16[1].label() == "model.attention=reference model.autocast=off");
  CATCH_CHECK_FALSE(from_bf16[1].changes_precision);
}

CATCH_TEST_CASE(
    "suggest: the fastest variant wins only past the margin, never a failed one or a failed baseline",
    "[unit][bench]") {
  std::vector<VariantResult> results{measured({}, 1000.0), measured({"a"}, 1040.0), measured({"b"}, 1200.0),
                                     measured({"c"}, 1100.0)};
  CATCH_CHECK(pick_suggestion(results, 1.05) == 2);
  CATCH_CHECK(pick_suggestion(results, 1.25) == 0);  // 1.2x does not clear a 1.25x margin

  results[2].tokens_per_s.clear();  // failed: its median must not count
  results[2].error = "bf16 unsupported";
  CATCH_CHECK(pick_suggestion(results, 1.05) == 3);

  results[0].tokens_per_s.clear();  // no baseline, nothing to compare against
  CATCH_CHECK(pick_suggestion(results, 1.05) == 0);
  CATCH_CHECK(pick_suggestion({}, 1.05) == 0);
}
