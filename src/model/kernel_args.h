// What the arguments of causal's CUDA kernels share, named without LibTorch so that a kernel's header and its
// .cu compile with nvcc alone: the element types they read and write, and how a kernel that sums over rows
// splits them into groups whose partial sums are then added in a fixed order (no atomics: the bits repeat).
#pragma once

#include <cstdint>

namespace causal {

enum class KernelDtype { kFloat, kBFloat16, kHalf };

// Rows per group for `rows` rows split into at most `max_groups` groups.
inline int64_t rows_per_group(int64_t rows, int64_t max_groups) {
  return rows <= max_groups ? 1 : (rows + max_groups - 1) / max_groups;
}

// Groups of `per_group` rows that cover `rows` rows.
inline int64_t group_count(int64_t rows, int64_t per_group) { return (rows + per_group - 1) / per_group; }

}  // namespace causal
