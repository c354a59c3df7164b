// Autocast switches per LibTorch version.
#include "model/autocast_scope.h"

#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

namespace causal {

namespace {

// 2.4 made the switches take a device type and deprecated the per-device functions of 1.x and 2.0-2.3.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool is_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
void set_enabled(c10::DeviceType device, bool enabled) {
  at::autocast::set_autocast_enabled(device, enabled);
}
c10::ScalarType get_dtype(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
void set_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
bool is_enabled(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_enabled(c10::DeviceType device, bool enabled) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
}
c10::ScalarType get_dtype(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
}
void set_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

bool supported(c10::DeviceType device) {
  return device == c10::DeviceType::CPU || device == c10::DeviceType::CUDA;
}

}  // namespace

AutocastScope::AutocastScope(c10::DeviceType device, c10::optional<c10::ScalarType> dtype) : device_(device) {
  if (!dtype.has_value()) return;
  TORCH_CHECK(supported(device), "[autocast] supported on cpu and cuda, not on ", device);
  was_enabled_ = is_enabled(device);
  previous_dtype_ = get_dtype(device);
  set_dtype(device, *dtype);
  set_enabled(device, true);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_enabled(device_, was_enabled_);
  set_dtype(device_, previous_dtype_);
}

c10::optional<c10::ScalarType> autocast_dtype(AutocastKind autocast) {
  if (autocast == AutocastKind::kBf16) return c10::kBFloat16;
  return c10::nullopt;
}

bool autocast_enabled(c10::DeviceType device) { return supported(device) && is_enabled(device); }

c10::optional<c10::ScalarType> enabled_autocast_dtype(c10::DeviceType device) {
  if (!autocast_enabled(device)) return c10::nullopt;
  return get_dtype(device);
}

at::Tensor in_products_dtype(const at::Tensor& t, c10::optional<c10::ScalarType> dtype) {
  const bool cast = t.defined() && dtype.has_value() && t.is_floating_point() &&
                    t.scalar_type() != c10::kDouble && t.scalar_type() != *dtype;
  return cast ? t.to(*dtype) : t;
}

}  // namespace causal
