// Numerical health of a training step: non-finite loss or gradients stop the run (exit code 5).
#pragma once

#include <stdexcept>
#include <string>

namespace causal {

class NonFiniteError : public std::runtime_error {
 public:
  explicit NonFiniteError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace causal
