// Joining a data-parallel job from the launch environment.
#include "run/rank_context.h"

#include <algorithm>

#include "core/errors.h"

namespace causal {

RankContext::RankContext(const RunConfig& config, const c10::Device& device) {
  const std::optional<LaunchEnvironment> env = LaunchEnvironment::from_environment();
  if (!env || env->world_size == 1) return;
  if (config.train.batch_size % env->world_size != 0) {
    throw ConfigError("WORLD_SIZE=" + std::to_string(env->world_size), "train.batch_size",
                      "the global batch " + std::to_string(config.train.batch_size) +
                          " must divide by the world size " + std::to_string(env->world_size) +
                          " (each rank takes batch_size / world_size rows of every micro-batch)");
  }
  group_ = std::make_unique<ProcessGroup>(*env, device, ProcessGroupOptions{config.dist.timeout_s});
  const auto bucket_bytes = static_cast<int64_t>(config.dist.bucket_mb * 1024.0 * 1024.0);
  parallel_ = std::make_unique<DataParallel>(*group_, std::max<int64_t>(bucket_bytes, 1));
}

ThreadChoice RankContext::thread_split(int64_t configured) {
  const std::optional<LaunchEnvironment> env = LaunchEnvironment::from_environment();
  const int64_t local_ranks = env ? env->local_world_size : 1;
  return choose_thread_split(configured, std::max<int64_t>(1, machine_cores() / local_ranks),
                             /*sample_load=*/local_ranks == 1);
}

std::optional<CheckpointInfo> RankContext::share_start(const std::optional<CheckpointInfo>& leaders) {
  if (!parallel_) return leaders;
  ProcessGroup& group = parallel_->group();
  if (leader()) {
    group.publish("start_checkpoint", leaders ? leaders->dir.string() : std::string());
    return leaders;
  }
  const std::string dir = group.fetch("start_checkpoint");
  if (dir.empty()) return std::nullopt;
  return read_checkpoint(dir);
}

}  // namespace causal
