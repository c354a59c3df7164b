// SIGINT and SIGTERM sent to one handler for a scope, the previous handlers restored after it: the
// training loop, the --nproc launcher and the sweep each install theirs this way.
#pragma once

#include <csignal>

namespace causal {

using SignalHandler = void (*)(int);

class StopSignalScope {
 public:
  // Without SA_RESTART: a blocking call (poll, waitpid) returns with EINTR, so a loop sees the signal.
  explicit StopSignalScope(SignalHandler handler);
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;

  // Leaves this scope's handler installed after it ends: for a process already on its way out.
  void keep_installed() { restore_ = false; }

 private:
  bool restore_ = true;
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace causal
