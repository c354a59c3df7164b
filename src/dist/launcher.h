// `causal train --nproc N`: the local launcher. Starts N copies of a command as ranks 0..N-1 on loopback
// with torchrun's environment variables, prefixes each one's console lines with "[rank R] ", forwards
// SIGINT/SIGTERM to all of them, and ends the job as soon as one fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"

namespace causal {

struct LocalLaunchOptions {
  int64_t nproc = 1;
  std::vector<std::string> command;  // argv of every worker ([0] is the executable)
  double grace_s = 10.0;             // after a failure: how long the others get to stop before SIGKILL
};

// A worker that failed: its rank, exit status and last error line; the exit code is the worker's own
// (128 + signal when it was killed by one).
class WorkerFailed : public Error {
 public:
  WorkerFailed(const std::string& message, int exit_code) : Error(message), exit_code_(exit_code) {}
  int exit_code() const override { return exit_code_; }

 private:
  int exit_code_;
};

// Runs the workers to completion and returns 0 when every one exited 0; throws WorkerFailed naming the
// first rank that failed (the others are stopped), DistributedError when a worker cannot be started.
int launch_local(const LocalLaunchOptions& options);

// A TCP port on 127.0.0.1 that was free a moment ago (for MASTER_PORT).
int free_loopback_port();

// This process's own command line (/proc/self/cmdline) without `--nproc N` / `--nproc=N`.
std::vector<std::string> own_command_without_nproc();

}  // namespace causal
