// Fault spec parsing.
#include "train/fault_injection.h"

#include <stdexcept>

namespace causal {

std::string FaultInjection::describe() const {
  static const char* kinds[] = {"none", "weight", "activation", "gradient"};
  return std::string(kinds[static_cast<int>(kind)]) + ":" + name + "@" + std::to_string(step);
}

FaultInjection FaultInjection::parse(const std::string& spec) {
  const auto colon = spec.find(':'), at = spec.rfind('@');
  const std::string usage =
      "--inject-fault " + spec + ": expected KIND:NAME@STEP with KIND weight, activation or gradient";
  if (colon == std::string::npos || at == std::string::npos || at < colon + 2)
    throw std::invalid_argument(usage);
  FaultInjection fault;
  const std::string kind = spec.substr(0, colon);
  if (kind == "weight") {
    fault.kind = Kind::kWeight;
  } else if (kind == "activation") {
    fault.kind = Kind::kActivation;
  } else if (kind == "gradient") {
    fault.kind = Kind::kGradient;
  } else {
    throw std::invalid_argument(usage);
  }
  fault.name = spec.substr(colon + 1, at - colon - 1);
  try {
    size_t used = 0;
    fault.step = std::stoll(spec.substr(at + 1), &used);
    if (used != spec.size() - at - 1 || fault.step < 1) throw std::invalid_argument(usage);
  } catch (const std::logic_error&) {
    throw std::invalid_argument(usage);
  }
  return fault;
}

}  // namespace causal
