// Reading the process environment, with one rule for every variable causal reads: empty means unset.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace causal {

// The value of environment variable `name`; nullopt when it is unset or empty.
inline std::optional<std::string> environment_variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace causal
