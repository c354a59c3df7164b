// Test helper: the device the device tests run on, from CAUSAL_TEST_DEVICE ("cpu" when unset), so the same
// suite checks a GPU where tools/gpu-check sets it to "cuda".
#pragma once

#include <string>

#include "core/environment.h"
#include "support/skip.h"

namespace causal::testing {

inline std::string test_device() { return environment_variable("CAUSAL_TEST_DEVICE").value_or("cpu"); }

// Why a test that compares the test device with the CPU has nothing to compare on the CPU itself; empty
// when the test device is another one.
inline std::string device_skip_reason() {
  if (test_device() != "cpu") return "";
  return "CAUSAL_TEST_DEVICE is cpu; set it to cuda on a machine with a GPU (tools/gpu-check)";
}

}  // namespace causal::testing

// Skips the enclosing test case (CAUSAL_SKIP_TEST) when the test device is the CPU: a test that compares
// the device with the CPU would compare the CPU with itself and pass whatever the device code does.
#define CAUSAL_SKIP_UNLESS_TEST_DEVICE()                                                 \
  do {                                                                                   \
    const std::string causal_device_skip_reason = causal::testing::device_skip_reason(); \
    if (!causal_device_skip_reason.empty()) CAUSAL_SKIP_TEST(causal_device_skip_reason); \
  } while (false)

// Skips the enclosing test case when this build has no CUDA kernels of causal's own (a build without
// CAUSAL_CUDA): a test of a kernel against ATen would have nothing to run.
#ifdef CAUSAL_CUDA_KERNELS
#define CAUSAL_SKIP_UNLESS_CUDA_KERNELS() \
  do {                                    \
  } while (false)
#else
#define CAUSAL_SKIP_UNLESS_CUDA_KERNELS() CAUSAL_SKIP_TEST("built without CAUSAL_CUDA: no kernel to check")
#endif
