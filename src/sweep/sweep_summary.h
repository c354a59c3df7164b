// A sweep's results as a table: one row per point (its varied values and every numeric field of its
// results.json, flattened with dotted names), the groups over seeds with mean and std, and the files
// summary.csv and summary.json.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sweep/sweep.h"

namespace causal {

// The grid key whose values are seeds: groups are taken over it.
constexpr const char* kSeedKey = "seed";

struct SummaryRow {
  std::string point;  // the point's folder name
  std::string state;  // point_state_name
  std::string run_dir;
  std::string error;                                           // a failed point's error, with its exit code
  std::vector<std::pair<std::string, nlohmann::json>> values;  // (grid key, value), grid order
  std::map<std::string, double> fields;  // flattened numeric fields of results.json (empty if none yet)
};

// The points that share every varied value but the seed.
struct SummaryGroup {
  std::vector<std::pair<std::string, nlohmann::json>> values;  // grid order, the seed key left out
  std::vector<size_t> rows;                                    // indices into SweepSummary::rows
  std::map<std::string, size_t> count;  // per field: how many rows of the group have it
  std::map<std::string, double> mean;   // per field, over the rows that have it
  std::map<std::string, double> std;    // sample standard deviation (n - 1); NaN for a single value
};

struct SweepSummary {
  std::vector<std::string> grid_keys;  // in grid order
  std::string metric;                  // the charted field (spec.metric or the first numeric column)
  std::string group_by;                // the grid key on the chart's x axis
  std::vector<std::string> columns;    // every flattened field of any row, first appearance order
  std::vector<SummaryRow> rows;        // grid order
  std::vector<SummaryGroup> groups;    // first appearance order
};

// Numeric leaves of `value` as "a.b.c" (array entries as "a.0"); booleans, strings and nulls are left out.
std::map<std::string, double> flatten_numbers(const nlohmann::json& value);

SweepSummary summarize_sweep(const SweepSpec& spec, const std::vector<PointResult>& points);

std::string summary_csv(const SweepSummary& summary);  // header + one line per row; RFC 4180 quoting
nlohmann::ordered_json summary_json(const SweepSummary& summary);

// summary.csv and summary.json in `out`, each written atomically. Throws RunFolderError.
void write_summary_files(const std::filesystem::path& out, const SweepSummary& summary);

}  // namespace causal
