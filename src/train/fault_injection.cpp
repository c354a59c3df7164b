// Fault spec parsing.
#include "train/fault_injection.h"

#include <algorithm>
#include <cctype>

#include "core/errors.h"

namespace causal {

std::string FaultInjection::describe() const {
  static const char* kinds[] = {"none", "weight", "activation", "gradient"};
  return std::string(kinds[static_cast<int>(kind)]) + ":" + name + "@" + std::to_string(step);
}

FaultInjection FaultInjection::parse(const std::string& spec) {
  const auto colon = spec.find(':'), at = spec.rfind('@');
  const std::string usage =
      "--inject-fault " + spec + ": expected KIND:NAME@STEP with KIND weight, activation or gradient";
  if (colon == std::string::npos || at == std::string::npos || at < colon + 2) throw UsageError(usage);
  FaultInjection fault;
  const std::string kind = spec.substr(0, colon);
  if (kind == "weight") {
    fault.kind = Kind::kWeight;
  } else if (kind == "activation") {
    fault.kind = Kind::kActivation;
  } else if (kind == "gradient") {
    fault.kind = Kind::kGradient;
  } else {
    throw UsageError(usage);
  }
  fault.name = spec.substr(colon + 1, at - colon - 1);
  const std::string digits = spec.substr(at + 1);
  if (digits.empty() || digits.size() > 12 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw UsageError(usage);
  fault.step = std::stoll(digits);  // at most 12 digits: cannot overflow
  if (fault.step < 1) throw UsageError(usage);
  return fault;
}

}  // namespace causal
