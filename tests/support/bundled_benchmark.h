// Test helper: the bundled benchmark's leading groups as a file of their own. The whole file (1,500 items)
// is for measuring; a test of the scoring mechanics needs a few whole groups (four consecutive lines each).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace causal::testing {

inline constexpr int64_t kBundledGroupItems = 100;  // the first 25 groups

// Writes the first `items` lines of data/benchmarks/brown-next-sentence.jsonl to `out`.
inline void write_bundled_groups(const std::filesystem::path& out, int64_t items = kBundledGroupItems) {
  std::ifstream in(std::filesystem::path(CAUSAL_SOURCE_DIR) / "data/benchmarks/brown-next-sentence.jsonl");
  std::ofstream file(out);
  std::string line;
  for (int64_t i = 0; i < items && std::getline(in, line); ++i) file << line << "\n";
}

}  // namespace causal::testing
