// One rank's membership of a data-parallel job: c10d's TCPStore rendezvous and process group (Gloo on
// the CPU, NCCL on CUDA builds). Every c10d failure (a rank that never joined, died, or stalled past the
// timeout) surfaces as DistributedError naming the operation; nothing here hangs past the timeout.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/launch_env.h"

namespace causal {

struct ProcessGroupOptions {
  double timeout_s = 60.0;  // rendezvous, store reads and each collective
};

class ProcessGroup {
 public:
  // Joins the job described by `env` (rank 0 hosts the store). Throws DistributedError when the other
  // ranks do not all arrive within the timeout, ConfigError for a device without a backend here.
  ProcessGroup(const LaunchEnvironment& env, const c10::Device& device, const ProcessGroupOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int64_t rank() const { return env_.rank; }
  int64_t world_size() const { return env_.world_size; }
  const LaunchEnvironment& environment() const { return env_; }
  const char* backend() const;

  // Blocking collectives, in place. `what` names the operation in errors ("gradient all-reduce").
  void all_reduce_sum(std::vector<at::Tensor>& tensors, const std::string& what);
  void all_reduce_max(at::Tensor& tensor, const std::string& what);
  void broadcast(std::vector<at::Tensor>& tensors, int64_t root, const std::string& what);
  // A sum all-reduce of `tensor` in place that runs on c10d's threads while the caller goes on;
  // `wait_started` blocks until every one started so far is done. `what` names it in errors.
  void start_all_reduce_sum(at::Tensor& tensor, const std::string& what);
  void wait_started(const std::string& what);
  // Small strings shared through the store (the run folder, a rank's error): set once, read by others.
  void publish(const std::string& key, const std::string& value);
  std::string fetch(const std::string& key);

 private:
  struct Impl;
  LaunchEnvironment env_;
  double timeout_s_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace causal
