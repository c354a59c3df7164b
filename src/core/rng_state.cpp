// Generator state <-> hex text.
#include "core/rng_state.h"

#include <ATen/ATen.h>

#include <mutex>
#include <stdexcept>

namespace causal {

std::string generator_state_hex(at::Generator generator) {
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state().contiguous();
  }
  static const char* digits = "0123456789abcdef";
  const auto* bytes = state.data_ptr<uint8_t>();
  std::string hex;
  hex.reserve(static_cast<size_t>(state.numel()) * 2);
  for (int64_t i = 0; i < state.numel(); ++i) {
    hex.push_back(digits[bytes[i] >> 4]);
    hex.push_back(digits[bytes[i] & 15]);
  }
  return hex;
}

void restore_generator_state(at::Generator generator, const std::string& hex, const std::string& what) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw std::runtime_error(what + ": generator state is not lowercase hex");
  };
  if (hex.empty() || hex.size() % 2 != 0) throw std::runtime_error(what + ": generator state has odd length");
  at::Tensor state = at::empty({static_cast<int64_t>(hex.size() / 2)}, at::kByte);
  auto* bytes = state.data_ptr<uint8_t>();
  for (size_t i = 0; i < hex.size() / 2; ++i)
    bytes[i] = static_cast<uint8_t>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  try {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  } catch (const c10::Error& e) {
    throw std::runtime_error(what + ": generator refused the stored state: " + e.what_without_backtrace());
  }
}

}  // namespace causal
