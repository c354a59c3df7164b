// What a run folder says about its run, read without locking it: config, metrics rows, results and
// checkpoints. Tolerates a run that is still being written (torn last line) and resumed runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace causal {

struct RunHistory {
  std::filesystem::path dir;
  std::optional<RunConfig> config;         // config.json read as this build's config (not re-validated)
  std::string config_problem;              // why config.json does not read so ("" when it does)
  nlohmann::json results;                  // results.json; null while the run is unfinished
  std::vector<nlohmann::json> train_rows;  // "kind":"train" rows, ascending step, one per step
  std::vector<nlohmann::json> eval_rows;   // "kind":"eval" rows, likewise
  std::vector<int64_t> restarts;           // last logged step before each resumed process took over
  int64_t skipped_lines = 0;               // unreadable metrics lines (a torn tail while writing)
  std::vector<std::string> checkpoints;    // step_NNNNNNNN directory names, ascending
  std::string latest;                      // checkpoints/LATEST, "" when absent
  nlohmann::json latest_state;             // that checkpoint's state.json (initial_loss, ...), or null

  int64_t last_step() const;  // step of the last train row, 0 when there is none
};

// Reads `run_dir`. Throws RunFolderError when the folder or its config.json is missing or not JSON;
// everything else is optional and missing pieces simply stay empty (a config.json this build cannot read,
// say from another version, leaves `config` empty and says why in `config_problem`).
RunHistory read_run_history(const std::filesystem::path& run_dir);

// A JSON file of a run folder that may be absent or half-written (the folder is read while it is being
// written): null then.
nlohmann::json read_optional_json(const std::filesystem::path& file);

// (step, value) of every row carrying `field` as a number; a null value (non-finite when logged) gives
// NaN, so a chart breaks its line there.
std::vector<std::pair<double, double>> field_points(const std::vector<nlohmann::json>& rows,
                                                    const std::string& field);
// Per-block lists such as act_rms: one (step, value) series per list index, over the rows carrying it.
std::vector<std::vector<std::pair<double, double>>> list_field_points(const std::vector<nlohmann::json>& rows,
                                                                      const std::string& field);

}  // namespace causal
