// Reading integers from JSON that nobody vouches for (manifests, safetensors headers, tokenizer records).
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

namespace causal {

// Whether `j` is an integer that T holds. nlohmann's get<T>() casts a float (2e82) to T, undefined
// behaviour when it does not fit, and wraps integers of the other signedness: check with this first.
template <class T>
bool json_integer_fits(const nlohmann::json& j) {
  if (j.is_number_unsigned())
    return j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!j.is_number_integer()) return false;
  const int64_t v = j.get<int64_t>();
  if (v < 0)
    return std::numeric_limits<T>::is_signed && v >= static_cast<int64_t>(std::numeric_limits<T>::min());
  return static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
}

}  // namespace causal
