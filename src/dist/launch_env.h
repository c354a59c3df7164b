// Where this process stands in a data-parallel job: torchrun's environment contract (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), as set by torchrun, SLURM wrappers or
// `causal train --nproc N`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace causal {

struct LaunchEnvironment {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;  // ranks on this machine (threads per rank default to cores / this)
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;

  // The variables of this process; nullopt when neither RANK nor WORLD_SIZE is set (a single process).
  // Throws UsageError naming the variable when one is set but missing, malformed or out of range.
  static std::optional<LaunchEnvironment> from_environment();
};

}  // namespace causal
