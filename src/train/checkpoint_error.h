// A checkpoint that cannot be written, read or trusted (exit code 4 at the CLI).
#pragma once

#include <stdexcept>
#include <string>

namespace causal {

class CheckpointError : public std::runtime_error {
 public:
  explicit CheckpointError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace causal
