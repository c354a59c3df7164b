// The retrieval lab's pass criteria (docs/retrieval-lab.md), defined once: the results table, the report
// and the end-to-end tests all read this table.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace causal {

struct LabCheck {
  enum class Op { kBelow, kAbove, kEqual };
  const char* field;  // the results.json key
  const char* label;  // how a person reads it: "test accuracy"
  Op op;
  double bound;             // the threshold, or a factor of `relative_to`
  const char* relative_to;  // results key the bound multiplies ("initial_loss"), or nullptr
  const char* note;         // what the bound means, shown beside it, or ""
};

const std::vector<LabCheck>& lab_checks();

// The check's threshold for these results: `bound`, or bound x results[relative_to] (NaN when missing).
double lab_check_threshold(const LabCheck& check, const nlohmann::json& results);

// Whether `value` passes against `results` (false when the threshold is unknown).
bool lab_check_passes(const LabCheck& check, double value, const nlohmann::json& results);

// The rule as text: "< 0.25 x initial loss", "> 0.9", "== 0".
std::string lab_check_rule(const LabCheck& check);

// The check on `field`, or nullptr.
const LabCheck* find_lab_check(const std::string& field);

}  // namespace causal
