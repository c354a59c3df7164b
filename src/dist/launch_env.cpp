// Parsing of the launcher's environment variables.
#include "dist/launch_env.h"

#include <cstdlib>

#include "core/environment.h"
#include "core/errors.h"

namespace causal {
namespace {

int64_t integer(const char* name, int64_t fallback, bool required, int64_t min, int64_t max) {
  const std::optional<std::string> text = environment_variable(name);
  if (!text) {
    if (required)
      throw UsageError(std::string("environment variable ") + name +
                       " is not set (needed with RANK/WORLD_SIZE, see docs/distributed.md)");
    return fallback;
  }
  char* end = nullptr;
  const long long value = std::strtoll(text->c_str(), &end, 10);
  if (*end != '\0' || value < min || value > max) {
    throw UsageError(std::string("environment variable ") + name + "=" + *text + ": expected an integer in " +
                     std::to_string(min) + ".." + std::to_string(max));
  }
  return value;
}

}  // namespace

std::optional<LaunchEnvironment> LaunchEnvironment::from_environment() {
  if (!environment_variable("RANK") && !environment_variable("WORLD_SIZE")) return std::nullopt;
  LaunchEnvironment env;
  env.world_size = integer("WORLD_SIZE", 1, true, 1, 1 << 20);
  env.rank = integer("RANK", 0, true, 0, env.world_size - 1);
  env.local_rank = integer("LOCAL_RANK", env.rank, false, 0, env.world_size - 1);
  env.local_world_size = integer("LOCAL_WORLD_SIZE", env.world_size, false, 1, env.world_size);
  if (const std::optional<std::string> addr = environment_variable("MASTER_ADDR")) {
    env.master_addr = *addr;
  } else if (env.world_size > 1) {
    throw UsageError(
        "environment variable MASTER_ADDR is not set (needed with WORLD_SIZE > 1, see docs/distributed.md)");
  }
  env.master_port = integer("MASTER_PORT", 29500, env.world_size > 1, 1, 65535);
  return env;
}

}  // namespace causal
