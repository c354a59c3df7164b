// What is known about a kind of task without opening any data: every per-workload choice of the commands
// and the report reads these, so no file outside task/ (and config/, which declares each kind's fields)
// tests data.kind itself.
#pragma once

#include "config/enums.h"

namespace causal {

struct TaskTraits {
  DataKind kind;
  const char* held_out_split;     // the split evaluate() scores: "val" or "test"
  const char* validation_split;   // a second split `eval --split` scores (evaluate_validation), or nullptr
  bool generates_text;            // `causal generate` applies (a tokenizer decodes its ids)
  bool scores_by_context_length;  // `eval --lengths` and `eval --difficulty` apply
  bool has_lab_checks;            // its results carry the retrieval lab's controls (task/lab_checks.h)
};

// Throws ConfigError for a kind without a registered task.
const TaskTraits& task_traits(DataKind kind);

}  // namespace causal
