// The state of a random generator as text, so checkpoints can store it in state.json and a resumed run
// draws exactly the numbers the uninterrupted run would have drawn.
#pragma once

#include <ATen/core/Generator.h>

#include <string>

namespace causal {

// Hex digits of the generator's serialized state (taken under its mutex). Generators are handles: the
// copy shares its state with the caller's.
std::string generator_state_hex(at::Generator generator);

// Sets the generator to a state from generator_state_hex. `what` names the generator in errors; throws
// std::runtime_error when the text is not hex or the generator refuses the state (another kind/version).
void restore_generator_state(at::Generator generator, const std::string& hex, const std::string& what);

}  // namespace causal
