// `causal report --run D`: the run folder -> D/report.html, one self-contained page (inline CSS and SVG,
// no script, nothing fetched) with the config, results, training curves, retrieval controls, every
// evaluation with the adapters behind its figures, and attention heatmaps of the newest valid checkpoint.
// Works on a run that is still being written.
#pragma once

#include <string>

namespace causal {

// The version the command line and the report footer print.
constexpr const char* kCausalVersion = "0.1";

// The page for `run_dir` as a string. Throws RunFolderError when the folder or its config.json is missing
// or unreadable; a missing checkpoint, results.json or metrics field only leaves a note on the page.
std::string render_report(const std::string& run_dir);

// The report's Evaluations as text (review/report_evaluations.h): each recorded figure with the adapters
// behind it, for `causal report` to print; "" when the run has no evaluation. Throws RunFolderError.
std::string render_summary(const std::string& run_dir);

// render_report written to run_dir/report.html via a temporary file and a rename (readers never see half
// a page); returns the path written. Throws RunFolderError (also when it cannot write).
std::string write_report(const std::string& run_dir);

}  // namespace causal
