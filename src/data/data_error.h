// A data file or generated data set that cannot be used (exit code 3 at the CLI).
#pragma once

#include <stdexcept>
#include <string>

namespace causal {

class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace causal
