// Generator states: in-memory snapshots, and hex text for files.
#include "core/rng_state.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "core/hex.h"

namespace causal {

std::string generator_state_hex(at::Generator generator) {
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state().contiguous();
  }
  return to_hex(state.data_ptr<uint8_t>(), static_cast<size_t>(state.numel()));
}

void restore_generator_state(at::Generator generator, const std::string& hex, const std::string& what) {
  const std::optional<std::vector<uint8_t>> bytes = from_hex(hex);
  if (!bytes || bytes->empty())
    throw std::runtime_error(what + ": generator state is not lowercase hex of even length");
  at::Tensor state = at::empty({static_cast<int64_t>(bytes->size())}, at::kByte);
  std::copy(bytes->begin(), bytes->end(), state.data_ptr<uint8_t>());
  try {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  } catch (const c10::Error& e) {
    throw std::runtime_error(what + ": generator refused the stored state: " + e.what_without_backtrace());
  }
}

namespace {

// A copy of `generator` in its present state.
at::Generator copy_of(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.clone();
}

void set_from(at::Generator generator, const at::Generator& snapshot) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(snapshot.get_state());
}

}  // namespace

GeneratorSnapshot GeneratorSnapshot::capture(const c10::Device& device) {
  std::optional<at::Generator> accelerator;
  if (!device.is_cpu()) accelerator = copy_of(at::globalContext().defaultGenerator(device));
  return GeneratorSnapshot(copy_of(at::detail::getDefaultCPUGenerator()), std::move(accelerator), device);
}

void GeneratorSnapshot::restore() const {
  set_from(at::detail::getDefaultCPUGenerator(), cpu_);
  if (device_) set_from(at::globalContext().defaultGenerator(device_kind_), *device_);
}

}  // namespace causal
