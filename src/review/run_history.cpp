// Reading a run folder for the report (see run_history.h).
#include "review/run_history.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "config/config_io.h"
#include "core/errors.h"
#include "io/complete_lines.h"
#include "io/run_files.h"

namespace causal {
namespace {

namespace fs = std::filesystem;

bool read_text(const fs::path& file, std::string& out) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

int64_t step_of(const nlohmann::json& row) {
  const auto it = row.find("step");
  return it != row.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
}

double number_or_nan(const nlohmann::json& value) {
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

nlohmann::json read_optional_json(const fs::path& file) {
  std::string text;
  if (!read_text(file, text)) return nullptr;
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? nlohmann::json() : value;
}

int64_t RunHistory::last_step() const { return train_rows.empty() ? 0 : step_of(train_rows.back()); }

RunHistory read_run_history(const fs::path& run_dir) {
  if (!fs::is_directory(run_dir)) {
    throw RunFolderError("[report] no run folder " + run_dir.string());
  }
  RunHistory h;
  h.dir = run_dir;
  const fs::path config_file = run_dir / run_files::kConfig;
  std::string text;
  if (!read_text(config_file, text)) {
    throw RunFolderError("[report] " + config_file.string() + ": missing (not a run folder?)");
  }
  const nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    throw RunFolderError("[report] " + config_file.string() + ": not a JSON object");
  }
  try {
    h.config = read_stored_config(config, config_file.string());
  } catch (const ConfigError& e) {
    h.config_problem = e.what();
  }
  h.results = read_optional_json(run_dir / run_files::kResults);
  if (!h.results.is_object()) h.results = nullptr;

  // metrics.jsonl: a run being written may end in a torn line; a resumed run truncated its rows to the
  // checkpoint, but older folders may repeat steps, so the last row written for a step wins.
  std::map<int64_t, nlohmann::json> train, eval;
  std::vector<double> elapsed_in_order;
  std::vector<int64_t> steps_in_order;
  // Only complete lines: the row a live run is appending is not one yet (io/complete_lines.h); the note
  // still counts it among the lines skipped.
  bool torn_tail = false;
  for (const std::string& line : read_complete_lines(run_dir / run_files::kMetrics, &torn_tail)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const int64_t step = row.is_object() ? step_of(row) : -1;
    if (row.is_discarded() || step < 0) {
      ++h.skipped_lines;
      continue;
    }
    const auto kind_it = row.find("kind");
    const std::string kind = kind_it != row.end() && kind_it->is_string() ? kind_it->get<std::string>() : "";
    if (kind == "train") {
      steps_in_order.push_back(step);
      elapsed_in_order.push_back(number_or_nan(row.value("elapsed", nlohmann::json())));
      train[step] = std::move(row);
    } else if (kind == "eval") {
      eval[step] = std::move(row);
    }
  }
  if (torn_tail) ++h.skipped_lines;
  for (auto& [step, row] : train) h.train_rows.push_back(std::move(row));
  for (auto& [step, row] : eval) h.eval_rows.push_back(std::move(row));
  // `elapsed` restarts from zero in each process: a drop marks a resume.
  for (size_t i = 1; i < elapsed_in_order.size(); ++i) {
    if (elapsed_in_order[i] < elapsed_in_order[i - 1] || steps_in_order[i] <= steps_in_order[i - 1]) {
      h.restarts.push_back(std::min(steps_in_order[i - 1], steps_in_order[i]));
    }
  }

  const fs::path checkpoints = run_dir / run_files::kCheckpoints;
  std::error_code ec;
  if (fs::is_directory(checkpoints, ec)) {
    for (const auto& entry : fs::directory_iterator(checkpoints, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("step_", 0) == 0 && entry.is_directory(ec)) h.checkpoints.push_back(name);
    }
    std::sort(h.checkpoints.begin(), h.checkpoints.end());
    if (read_text(checkpoints / "LATEST", text)) {
      h.latest = text.substr(0, text.find_first_of("\r\n"));
      if (!h.latest.empty()) h.latest_state = read_optional_json(checkpoints / h.latest / "state.json");
    }
  }
  return h;
}

std::vector<std::pair<double, double>> field_points(const std::vector<nlohmann::json>& rows,
                                                    const std::string& field) {
  std::vector<std::pair<double, double>> out;
  for (const nlohmann::json& row : rows) {
    const auto it = row.find(field);
    if (it == row.end() || !(it->is_number() || it->is_null())) continue;
    out.emplace_back(static_cast<double>(step_of(row)), number_or_nan(*it));
  }
  return out;
}

std::vector<std::vector<std::pair<double, double>>> list_field_points(const std::vector<nlohmann::json>& rows,
                                                                      const std::string& field) {
  std::vector<std::vector<std::pair<double, double>>> out;
  for (const nlohmann::json& row : rows) {
    const auto it = row.find(field);
    if (it == row.end() || !it->is_array()) continue;
    if (it->size() > out.size()) out.resize(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      out[i].emplace_back(static_cast<double>(step_of(row)), number_or_nan((*it)[i]));
    }
  }
  return out;
}

}  // namespace causal
