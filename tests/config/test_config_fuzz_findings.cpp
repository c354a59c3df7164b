// Regression tests for what tests/fuzz found in the config layer (docs/faults.md#fuzzing): inputs that once
// escaped as an exception that is not a ConfigError (exit 1 instead of 2), or took minutes to refuse.
#include <catch2/catch.hpp>
#include <string>

#include "config/config_io.h"
#include "core/errors.h"

using namespace causal;

CATCH_TEST_CASE("config fuzz findings: --set values that are not UTF-8 are ConfigErrors", "[unit][config]") {
  // fuzz_overrides: the enum error message dumped the value as JSON, which throws on invalid UTF-8.
  for (const std::string& assignment : {std::string("model.rope.scaling=yaor=4\xff\xff\xff\xff"),
                                        std::string("name=run\xc3"), std::string("model.ffn=\xfe")}) {
    RunConfig config;
    try {
      apply_override(config, assignment);
      CATCH_FAIL("accepted " + assignment);
    } catch (const ConfigError& e) {
      CATCH_CHECK(std::string(e.what()).find("not valid UTF-8") != std::string::npos);
    }
  }
  // Valid UTF-8 beyond ASCII still passes through to the field.
  RunConfig config;
  apply_override(config, "name=caf\xc3\xa9");
  CATCH_CHECK(config.name == "caf\xc3\xa9");
}

CATCH_TEST_CASE("config fuzz findings: a d_model whose derived FFN width overflows is a ConfigError",
                "[unit][config]") {
  // fuzz_overrides (UBSan): resolve() computed ffn_hidden = 4 * d_model in int64 before validate ran.
  try {
    parse_config_text("{}", "defaults", {"model.d_model=4218447037099999999"});
    CATCH_FAIL("accepted a d_model of 4218447037099999999");
  } catch (const ConfigError& e) {
    CATCH_CHECK(std::string(e.what()).find("model.d_model") != std::string::npos);
  }
}

CATCH_TEST_CASE("config fuzz findings: an n_heads far above d_model is refused with a bounded hint search",
                "[unit][config]") {
  // fuzz_overrides (timeout): the "n_heads that divide it" hint counted down from n_heads - 1 to a divisor
  // of d_model, 4.3 billion steps for this input (about 5 minutes).
  try {
    parse_config_text("{}", "defaults", {"model.d_model=64", "model.n_heads=4299999999"});
    CATCH_FAIL("accepted n_heads 4299999999");
  } catch (const ConfigError& e) {
    CATCH_CHECK(std::string(e.what()).find("model.n_heads") != std::string::npos);
    // The hint still names the nearest divisor: d_model itself.
    CATCH_CHECK(std::string(e.what()).find("n_heads that divide it: 64") != std::string::npos);
  }
}

CATCH_TEST_CASE("config fuzz findings: an n_heads of 2^63 - 1 gets its hint without overflow",
                "[unit][config]") {
  // fuzz_hf (UBSan): the upward search began at n_heads + 1, a signed overflow for 2^63 - 1.
  try {
    parse_config_text("{}", "defaults", {"model.d_model=64", "model.n_heads=9223372036854775807"});
    CATCH_FAIL("accepted n_heads 2^63 - 1");
  } catch (const ConfigError& e) {
    CATCH_CHECK(std::string(e.what()).find("n_heads that divide it: 64") != std::string::npos);
  }
}
