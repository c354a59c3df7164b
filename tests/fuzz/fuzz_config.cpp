// libFuzzer harness: a config file's text (JSON with // comments) through parse_config_text.
#include <nlohmann/json.hpp>
#include <string>

#include "config/config_io.h"
#include "fuzz_support.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  RunConfig config;
  try {
    config = parse_config_text(text, "fuzz.json");
  } catch (const Error& e) {
    fuzz::expected(e);
    return 0;
  }
  // A config that loads is written back as the resolved config.json of a run, which must load again to the
  // same config (`causal train --config runs/X/config.json` repeats the run).
  const std::string written = config_to_string(config);
  RunConfig again;
  try {
    again = parse_config_text(written, "written.json");
  } catch (const Error& e) {
    std::fprintf(stderr, "[fuzz] the resolved config does not load again: %s\n", e.what());
    fuzz::require(false, "config_to_string(parse_config_text(x)) loads");
  }
  fuzz::require(config_to_json(again) == config_to_json(config), "the resolved config round-trips");
  return 0;
}
