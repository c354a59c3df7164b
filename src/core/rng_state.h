// The state of a random generator as text, so checkpoints can store it in state.json and a resumed run
// draws exactly the numbers the uninterrupted run would have drawn.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace causal {

// Hex digits of the generator's serialized state (taken under its mutex). Generators are handles: the
// copy shares its state with the caller's.
std::string generator_state_hex(at::Generator generator);

// Sets the generator to a state from generator_state_hex. `what` names the generator in errors; throws
// std::runtime_error when the text is not hex or the generator refuses the state (another kind/version).
void restore_generator_state(at::Generator generator, const std::string& hex, const std::string& what);

// The default generators a training step draws from (the CPU's and, on an accelerator, the device's),
// copied in memory: the one way a step's randomness is kept for replay. It is turned into text only when
// written (checkpoints, forensics bundles).
class GeneratorSnapshot {
 public:
  static GeneratorSnapshot capture(const c10::Device& device);
  // Sets the live generators to the captured states.
  void restore() const;
  const at::Generator& cpu() const { return cpu_; }
  // The accelerator's generator; nullopt on the CPU.
  const std::optional<at::Generator>& device() const { return device_; }
  const c10::Device& device_kind() const { return device_kind_; }

 private:
  GeneratorSnapshot(at::Generator cpu, std::optional<at::Generator> device, c10::Device kind)
      : cpu_(std::move(cpu)), device_(std::move(device)), device_kind_(kind) {}
  at::Generator cpu_;
  std::optional<at::Generator> device_;
  c10::Device device_kind_;
};

}  // namespace causal
