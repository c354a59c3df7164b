// This process's part in a run: a single process, or one rank of a data-parallel job launched through
// the environment (torchrun's contract; `causal train --nproc N` sets it for its workers).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "core/runtime.h"
#include "dist/data_parallel.h"
#include "dist/launch_env.h"
#include "dist/process_group.h"

namespace causal {

class RankContext {
 public:
  // Reads the launch environment; with a world size above 1, checks that train.batch_size splits over
  // the ranks (ConfigError) and joins the process group (DistributedError within dist.timeout_s).
  RankContext(const RunConfig& config, const c10::Device& device);

  bool distributed() const { return parallel_ != nullptr; }
  bool leader() const { return !parallel_ || parallel_->leader(); }
  int64_t rank() const { return parallel_ ? parallel_->rank() : 0; }
  int64_t world_size() const { return parallel_ ? parallel_->world_size() : 1; }
  DataParallel* parallel() { return parallel_.get(); }
  const char* backend() const { return group_ ? group_->backend() : "none"; }

  // This process's CPU threads for `configured` (0 = this machine's cores shared by its ranks). Ranks of
  // one machine start together and would count each other as load, so only a lone process samples it.
  static ThreadChoice thread_split(int64_t configured);

  // The leader's choice of checkpoint to start from (nullopt: a fresh run), shared with every rank: the
  // leader passes its own and the others read the same directory (a shared filesystem across machines).
  std::optional<CheckpointInfo> share_start(const std::optional<CheckpointInfo>& leaders);

 private:
  std::unique_ptr<ProcessGroup> group_;
  std::unique_ptr<DataParallel> parallel_;
};

}  // namespace causal
