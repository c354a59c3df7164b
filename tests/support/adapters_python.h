// Test helper: tests/interop/adapters.py (LoRA adapters in their Python consumers) run under
// tests/interop/python.sh, and the per-token log-probability comparison the adapter tests make.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.h"

namespace causal::testing {

// `adapters.py ARGS` from the source root, its output in `log`; the exit status (-1 for a signal).
inline int adapters_python(const std::string& args, const std::filesystem::path& log) {
  const std::string cmd = std::string("cd ") + CAUSAL_SOURCE_DIR +
                          " && tests/interop/python.sh tests/interop/adapters.py " + args + " >" +
                          log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// "" when llama_cpp, peft and transformers import; else the line a test prints to be reported skipped.
inline std::string adapters_python_skip(const std::filesystem::path& root) {
  if (adapters_python("probe", root / "probe.log") == 0) return "";
  std::string why = slurp(root / "probe.log");
  while (!why.empty() && why.back() == '\n') why.pop_back();
  return "SKIPPED: the interop Python packages are missing (" + why +
         "); install them with: bash -c 'source tools/setup.sh && ensure_interop_python'";
}

// The largest |a - b| over two lists of per-sequence log-probabilities, which must have the same shape.
inline double max_abs_logprob_diff(const nlohmann::json& a, const nlohmann::json& b) {
  CATCH_REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t d = 0; d < a.size(); ++d) {
    CATCH_REQUIRE(a[d].size() == b[d].size());
    for (size_t t = 0; t < a[d].size(); ++t)
      worst = std::max(worst, std::abs(a[d][t].get<double>() - b[d][t].get<double>()));
  }
  return worst;
}

}  // namespace causal::testing
