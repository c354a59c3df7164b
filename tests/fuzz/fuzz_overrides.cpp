// libFuzzer harness: --set overrides, one "dotted.path=value" a line, applied to the default config and
// then resolved and validated, as `causal train --set ...` does.
#include <string>
#include <vector>

#include "config/config_io.h"
#include "fuzz_support.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    overrides.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  try {
    // The path every command takes: a file's text (here the defaults), then the flags in order.
    parse_config_text("{}", "defaults", overrides);
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  try {
    RunConfig config;
    for (const std::string& assignment : overrides) apply_override(config, assignment);
    resolve(config);
    validate(config, "--set", ConfigScope::kModel);
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
