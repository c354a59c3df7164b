// The figures `causal eval` recorded in a run folder (RUN/eval/*.json), each with the adapters that
// produced it: what the report lists, `causal report` prints and `eval --adapter` compares.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "review/adapter_choice.h"

namespace causal {

// The label of figures of a whole checkpoint evaluated as it is ("adapter": null), and of records
// written before eval named the adapters (no "adapter" field).
inline constexpr const char* kWholeModelLabel = "whole model";
inline constexpr const char* kUnrecordedLabel = "(not recorded)";

struct EvalRecord {
  std::string file;         // the file's name inside RUN/eval
  int64_t step = -1;        // the --run checkpoint's step (-1 when the record lacks it)
  std::string what;         // "val split", "test split", "benchmarks", "difficulty grid"
  AdapterIdentity adapter;  // label kWholeModelLabel or kUnrecordedLabel when no adapters are named
  std::vector<std::pair<std::string, double>> figures;  // headline_figures
};

// The figures worth a column: loss, perplexity, bits per byte, test and validation accuracy; each
// benchmark's acc and acc_norm ("<name> acc"). Non-numbers are left out.
std::vector<std::pair<std::string, double>> headline_figures(const nlohmann::json& figures);

// One record from what eval wrote to `file` (a name inside RUN/eval).
EvalRecord eval_record(const std::string& file, const nlohmann::json& figures);

// Every readable RUN/eval/*.json, by step and then file name; a half-written or foreign file is skipped
// (the folder may be being written).
std::vector<EvalRecord> read_eval_records(const std::filesystem::path& run_dir);

// One line per record: step, what, adapters (with their digest prefix), the headline figures, the file.
std::string format_eval_records(const std::vector<EvalRecord>& records);

}  // namespace causal
