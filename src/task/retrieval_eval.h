// Evaluation of the retrieval task: test loss/accuracy and the lab's three controls
// (docs/retrieval-lab.md#controls) (no-context ablation, changed-value intervention, future-perturbation
// causality), with accuracy broken down by evidence position, distractor count and length.
#pragma once

#include <c10/core/Device.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "data/retrieval_data.h"
#include "model/transformer.h"

namespace causal {

struct RetrievalReport {
  std::string split = "test";                   // "test" or "val": names the keys of to_json
  double test_loss = 0.0;                       // mean cross-entropy at the query over the test split
  double test_accuracy = 0.0;                   // argmax == answer
  double no_context_accuracy = 0.0;             // only the query record is given (chance = 1/value_count)
  std::optional<double> intervention_accuracy;  // evidence value changed: prediction follows the new value;
                                                // absent for query-only rows (no evidence record to change)
  double causality_max_diff = 0.0;              // max |logit change| before the cut when later values change
  nlohmann::json by_evidence_position;          // {"<index>": {"count", "accuracy"}}
  nlohmann::json by_distractors;                // {"<count>": {"count", "accuracy"}}
  nlohmann::json by_pairs;  // {"<pairs>": {"count", "accuracy", "loss"}}, held-out lengths included

  // test: the results.json keys (test_loss, test_accuracy, no_context_accuracy, ...); val: the same with
  // the prefix "val_" (val_loss, val_accuracy, val_no_context_accuracy, ...).
  nlohmann::json to_json() const;
};

// Runs every control on the test split (and held-out lengths) in eval mode without gradients.
RetrievalReport evaluate_retrieval(Transformer& model, const RetrievalData& data, const c10::Device& device);
// The same controls on the validation split (no held-out lengths): periodic evaluation and selection.
RetrievalReport evaluate_retrieval_validation(Transformer& model, const RetrievalData& data,
                                              const c10::Device& device);

// Predicted answer ids (N) at the last position of every row of `batch`, eval mode, no gradients.
at::Tensor predict_retrieval_answers(Transformer& model, const Batch& batch, const c10::Device& device);

// Loss at the query on the first min(128, N) training rows: the "initial loss" measured before step one.
double retrieval_fixed_batch_loss(Transformer& model, const RetrievalData& data, const c10::Device& device);

// The human-readable results table (the keys of results.json it knows about, in a fixed order).
std::string format_retrieval_table(const nlohmann::json& results);

}  // namespace causal
