// Autocast for the length of one forward pass, and the only place that knows how each LibTorch version
// spells the autocast switches.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

#include "config/enums.h"

namespace causal {

// While alive, matrix products on `device` run in `dtype` (ATen's autocast lists decide which ops);
// nullopt leaves autocast as it was. On leaving, the previous state comes back and, when the outermost
// scope ends, the cache of cast weights is dropped: the next forward must not see last step's weights.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, c10::optional<c10::ScalarType> dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::kFloat;
};

// The dtype model.autocast runs the matrix products in; nullopt for "off".
c10::optional<c10::ScalarType> autocast_dtype(AutocastKind autocast);

// The dtype the model's matrix products run in: autocast's, else float32 (the parameters' dtype).
inline c10::ScalarType products_dtype(AutocastKind autocast) {
  return autocast_dtype(autocast).value_or(c10::kFloat);
}

// Whether autocast is on for `device` (CPU and CUDA; false for other devices).
bool autocast_enabled(c10::DeviceType device);

// The dtype autocast runs `device`'s matrix products in while it is on; nullopt while it is off.
c10::optional<c10::ScalarType> enabled_autocast_dtype(c10::DeviceType device);

// t as autocast casts a product's floating argument (never float64) when it runs products in `dtype`, so that
// a custom product can keep the cast for backward in place of the parameter; t itself for nullopt.
at::Tensor in_products_dtype(const at::Tensor& t, c10::optional<c10::ScalarType> dtype);

}  // namespace causal
