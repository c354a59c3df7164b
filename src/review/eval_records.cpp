// Reading RUN/eval back, one record per file, with the adapters behind its figures (see eval_records.h).
#include "review/eval_records.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <system_error>

#include "io/run_files.h"
#include "review/run_history.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

void add_number(std::vector<std::pair<std::string, double>>& out, const std::string& name,
                const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  if (it != object.end() && it->is_number()) out.emplace_back(name, it->get<double>());
}

std::string what_of(const nlohmann::json& figures) {
  if (figures.contains("benchmarks")) return "benchmarks";
  if (figures.contains("cells")) return "difficulty grid";
  const auto split = figures.find("split");
  return split != figures.end() && split->is_string() ? split->get<std::string>() + " split" : "?";
}

}  // namespace

std::vector<std::pair<std::string, double>> headline_figures(const nlohmann::json& figures) {
  std::vector<std::pair<std::string, double>> out;
  if (!figures.is_object()) return out;
  for (const char* key : {"loss", "perplexity", "bits_per_byte", "test_accuracy", "val_accuracy"})
    add_number(out, key, figures, key);
  const auto benchmarks = figures.find("benchmarks");
  if (benchmarks != figures.end() && benchmarks->is_object()) {
    for (const auto& [name, report] : benchmarks->items()) {
      if (!report.is_object()) continue;
      add_number(out, name + " acc", report, "acc");
      add_number(out, name + " acc_norm", report, "acc_norm");
    }
  }
  return out;
}

EvalRecord eval_record(const std::string& file, const nlohmann::json& figures) {
  EvalRecord record;
  record.file = file;
  const auto step = figures.find("step");
  if (step != figures.end() && step->is_number_integer()) record.step = step->get<int64_t>();
  record.what = what_of(figures);
  const auto adapter = figures.find("adapter");
  if (adapter == figures.end()) {
    record.adapter.label = kUnrecordedLabel;
  } else if (adapter->is_null()) {
    record.adapter.label = kWholeModelLabel;
  } else {
    record.adapter = AdapterIdentity::from_json(*adapter);
  }
  record.figures = headline_figures(figures);
  return record;
}

std::vector<EvalRecord> read_eval_records(const fs::path& run_dir) {
  std::vector<EvalRecord> records;
  std::error_code ec;
  const fs::path dir = run_dir / run_files::kEval;
  if (!fs::is_directory(dir, ec)) return records;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json" || name.rfind("step_", 0) != 0) continue;
    const nlohmann::json figures = read_optional_json(entry.path());
    if (!figures.is_object()) continue;
    records.push_back(eval_record(name, figures));
  }
  std::sort(records.begin(), records.end(), [](const EvalRecord& a, const EvalRecord& b) {
    return a.step != b.step ? a.step < b.step : a.file < b.file;
  });
  return records;
}

std::string format_eval_records(const std::vector<EvalRecord>& records) {
  size_t width = 0;
  for (const EvalRecord& r : records) width = std::max(width, describe_adapter(r.adapter).size());
  std::string out;
  for (const EvalRecord& r : records) {
    std::string figures;
    for (const auto& [name, value] : r.figures) figures += fmt::format("  {} {:.6g}", name, value);
    out += fmt::format("  step {:<6} {:<15} {:<{}}{}  {}\n", r.step, r.what, describe_adapter(r.adapter),
                       width, figures, r.file);
  }
  return out;
}

}  // namespace causal
