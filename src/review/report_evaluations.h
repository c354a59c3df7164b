// report.html's Evaluations section and `causal report`'s text summary: every figure `causal eval` recorded
// in the run folder and the latest of training's eval rows, each beside the adapters that produced it.
#pragma once

#include <string>
#include <vector>

#include "review/eval_records.h"
#include "review/run_history.h"

namespace causal {

// RUN/eval's records, then (when metrics.jsonl has eval rows) the latest eval row as a record of file
// "metrics.jsonl": for a LoRA run labelled with the run's own adapters at that step, else a whole model.
std::vector<EvalRecord> evaluation_records(const RunHistory& h);

// The section, as HTML; a note when the run has no evaluation yet.
std::string evaluations_section(const std::vector<EvalRecord>& records);

// The same as text ("" when there is none), for the terminal.
std::string evaluations_summary(const std::vector<EvalRecord>& records);

}  // namespace causal
