// Test helper: the device the device tests run on, from CAUSAL_TEST_DEVICE ("cpu" when unset), so the same
// suite checks a GPU where tools/gpu-check sets it to "cuda".
#pragma once

#include <string>

#include "core/environment.h"

namespace causal::testing {

inline std::string test_device() { return environment_variable("CAUSAL_TEST_DEVICE").value_or("cpu"); }

// Why a test that compares the test device with the CPU has nothing to compare on the CPU itself; empty
// when the test device is another one.
inline std::string device_skip_reason() {
  if (test_device() != "cpu") return "";
  return "SKIPPED: CAUSAL_TEST_DEVICE is cpu; set it to cuda on a machine with a GPU (tools/gpu-check)";
}

}  // namespace causal::testing
