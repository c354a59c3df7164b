// The one LibTorch version difference in the optimizer API that causal touches: the key of an optimizer's
// per-parameter state map.
#pragma once

#include <ATen/core/Tensor.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace causal {

// The optimizer's state map is keyed by the parameter's TensorImpl: as text in LibTorch 1.x, as the
// pointer itself in 2.x. The key type decides which.
template <class StateMap>
typename StateMap::key_type state_key(const StateMap&, const at::Tensor& parameter) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << parameter.unsafeGetTensorImpl();
    return text.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

}  // namespace causal
