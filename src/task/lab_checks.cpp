// The retrieval lab's thresholds and how a value is judged against them.
#include "task/lab_checks.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace causal {

const std::vector<LabCheck>& lab_checks() {
  using Op = LabCheck::Op;
  // A trained model must beat a quarter of the untrained loss, answer 9 in 10 queries, fail without the
  // context (chance is 1/value_count), follow an edited record and never let a future token move a logit.
  static const std::vector<LabCheck> checks = {
      {"test_loss", "test loss", Op::kBelow, 0.25, "initial_loss", ""},
      {"test_accuracy", "test accuracy", Op::kAbove, 0.90, nullptr, ""},
      {"no_context_accuracy", "no-context accuracy", Op::kBelow, 0.25, nullptr, "chance = 1/value_count"},
      {"intervention_accuracy", "intervention accuracy", Op::kAbove, 0.85, nullptr, ""},
      {"causality_max_diff", "causality max diff", Op::kEqual, 0.0, nullptr, ""},
  };
  return checks;
}

double lab_check_threshold(const LabCheck& check, const nlohmann::json& results) {
  if (check.relative_to == nullptr) return check.bound;
  const auto base = results.find(check.relative_to);
  if (base == results.end() || !base->is_number()) return std::numeric_limits<double>::quiet_NaN();
  return check.bound * base->get<double>();
}

bool lab_check_passes(const LabCheck& check, double value, const nlohmann::json& results) {
  const double threshold = lab_check_threshold(check, results);
  if (!std::isfinite(threshold) || std::isnan(value)) return false;
  switch (check.op) {
    case LabCheck::Op::kBelow:
      return value < threshold;
    case LabCheck::Op::kAbove:
      return value > threshold;
    case LabCheck::Op::kEqual:
      return value == threshold;
  }
  return false;
}

std::string lab_check_rule(const LabCheck& check) {
  std::ostringstream out;
  out << (check.op == LabCheck::Op::kBelow   ? "< "
          : check.op == LabCheck::Op::kAbove ? "> "
                                             : "== ")
      << check.bound;
  if (check.relative_to != nullptr) out << " x " << check.relative_to;
  return out.str();
}

const LabCheck* find_lab_check(const std::string& field) {
  for (const LabCheck& check : lab_checks()) {
    if (field == check.field) return &check;
  }
  return nullptr;
}

}  // namespace causal
