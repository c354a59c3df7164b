// Test helper: the rows of a run folder's metrics.jsonl of one kind ("train", "eval").
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace causal::testing {

inline std::vector<nlohmann::json> metrics_rows(const std::filesystem::path& run, const std::string& kind) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json row = nlohmann::json::parse(line);
    if (row["kind"] == kind) rows.push_back(row);
  }
  return rows;
}

}  // namespace causal::testing
