// The names inside a run folder (docs/run-folder.md). The run writes them and the checkpointer, the
// readers (eval, report) and the sweep find them, so each is spelled once, here.
#pragma once

namespace causal::run_files {

inline constexpr const char* kConfig = "config.json";       // the resolved config
inline constexpr const char* kLog = "log.txt";              // the human-readable log
inline constexpr const char* kMetrics = "metrics.jsonl";    // one JSON row per logged step or evaluation
inline constexpr const char* kResults = "results.json";     // written once, when the run finished
inline constexpr const char* kReport = "report.html";       // `causal report`
inline constexpr const char* kCheckpoints = "checkpoints";  // step_N/ folders
inline constexpr const char* kEval = "eval";                // `causal eval` results, step_N*.json
inline constexpr const char* kForensics = "forensics";      // bundles of non-finite steps
inline constexpr const char* kLock = ".lock";               // held by the process writing the folder

}  // namespace causal::run_files
