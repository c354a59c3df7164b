// The Evaluations section of the report (see report_evaluations.h).
#include "review/report_evaluations.h"

#include <spdlog/fmt/fmt.h>

#include "checkpoint/checkpoint_dir.h"
#include "io/run_files.h"
#include "review/svg_chart.h"
#include "task/benchmark_eval.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

constexpr const char* kTrainingRows = "training eval row";

// A metrics eval row under the names `causal eval` records use, for headline_figures.
json as_eval_figures(const json& row) {
  json figures = json::object();
  for (const char* key : {"loss", "perplexity", "bits_per_byte"}) {
    const std::string val = std::string("val_") + key;
    if (row.contains(val)) figures[key] = row[val];
  }
  if (!figures.contains("loss") && row.contains("test_loss")) figures["loss"] = row["test_loss"];
  for (const char* key : {"test_accuracy", "val_accuracy"})
    if (row.contains(key)) figures[key] = row[key];
  for (const std::string& name : benchmark_names(row)) {
    for (const char* figure : {"acc", "acc_norm"}) {
      const std::string key = benchmark_key(name, figure);
      if (row.contains(key)) figures["benchmarks"][name][figure] = row[key];
    }
  }
  return figures;
}

// Training evaluates the weights it is training: a LoRA run's own adapters at that step (their digest
// when the step was kept as a checkpoint), else the whole model.
AdapterIdentity training_adapters(const RunHistory& h, int64_t step) {
  AdapterIdentity identity;
  if (!h.config || !h.config->train.lora.enabled()) {
    identity.label = kWholeModelLabel;
    return identity;
  }
  identity.label = run_step_label(h.dir, step);
  identity.step = step;
  const json base = h.latest_state.is_object() ? h.latest_state.value("base", json()) : json();
  if (base.is_object()) {
    identity.base = base.value("checkpoint", "");
    identity.base_sha256 = base.value("model_sha256", "");
  }
  const fs::path checkpoint = h.dir / run_files::kCheckpoints / checkpoint_name(step);
  const json manifest = read_optional_json(checkpoint / "manifest.json");
  const json files = manifest.is_object() ? manifest.value("files", json()) : json();
  if (files.is_object() && files.contains("adapter.safetensors")) {
    identity.checkpoint = checkpoint.string();
    identity.sha256 = files.at("adapter.safetensors").value("sha256", "");
  }
  return identity;
}

std::string figures_text(const EvalRecord& r) {
  std::string out;
  for (const auto& [name, value] : r.figures)
    out += fmt::format("{}{} {:.6g}", out.empty() ? "" : ", ", name, value);
  return out.empty() ? "\u2014" : out;
}

}  // namespace

std::vector<EvalRecord> evaluation_records(const RunHistory& h) {
  std::vector<EvalRecord> records = read_eval_records(h.dir);
  if (!h.eval_rows.empty()) {
    const nlohmann::json& row = h.eval_rows.back();
    EvalRecord training = eval_record(run_files::kMetrics, as_eval_figures(row));
    training.step = row.value("step", int64_t{-1});
    training.what = kTrainingRows;
    training.adapter = training_adapters(h, training.step);
    records.push_back(training);
  }
  return records;
}

std::string evaluations_section(const std::vector<EvalRecord>& records) {
  using svg::xml_escape;
  std::string out = "<section id=\"evaluations\"><h2>Evaluations</h2>\n";
  if (records.empty()) {
    return out +
           "<p class=\"note\">No evaluation yet: no eval rows in metrics.jsonl, nothing in eval/ (causal "
           "eval).</p>\n</section>\n";
  }
  out +=
      "<p class=\"meta\">Each figure with the weights behind it: <code>causal eval</code>'s records "
      "(eval/, one per checkpoint, split or benchmarks and adapters: <code>--adapter</code>), and the "
      "latest eval row of training. Adapters are named run@step, with their adapter.safetensors SHA-256 "
      "prefix; <code>" +
      std::string(kNoAdapterLabel) + "</code> is the base alone.</p>\n<div class=\"box scroll\"><table>\n" +
      "<tr><th>step</th><th>evaluated</th><th>adapters</th><th>adapter checkpoint</th><th>figures</th>"
      "<th>file</th></tr>\n";
  for (const EvalRecord& r : records) {
    std::string where = r.adapter.none() ? (r.adapter.base.empty() ? "\u2014" : "base " + r.adapter.base)
                                         : r.adapter.checkpoint;
    if (!r.adapter.sha256.empty()) where += " (sha256 " + r.adapter.sha256.substr(0, kDigestShown) + ")";
    out += "<tr><td class=\"num\">" + std::to_string(r.step) + "</td><td>" + xml_escape(r.what) +
           "</td><td><code>" + xml_escape(r.adapter.label) + "</code></td><td><code>" + xml_escape(where) +
           "</code></td><td>" + xml_escape(figures_text(r)) + "</td><td><code>" + xml_escape(r.file) +
           "</code></td></tr>\n";
  }
  return out + "</table></div>\n</section>\n";
}

std::string evaluations_summary(const std::vector<EvalRecord>& records) {
  if (records.empty()) return "";
  return "evaluations (step, what, adapters, figures, file)\n" + format_eval_records(records);
}

}  // namespace causal
