// SIGINT/SIGTERM during training: the first signal asks the loop to finish its step, save a checkpoint
// and stop (exit 130/143); a second one exits at once, leaving the last complete checkpoint as it was.
#pragma once

#include "core/errors.h"
#include "core/stop_signals.h"

namespace causal {

// Installs the handlers for its lifetime and restores the previous ones after, unless a signal came or an
// exception is leaving the loop: then they stay, so that a signal during the way out neither kills the
// process by the default action before it reports its error (a --nproc launcher stops the other ranks as
// soon as one fails, and after a non-finite step all fail together, the leader last) nor, if it is the
// second, waits: that one exits at once with 128 + signal. One at a time.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  int pending() const;  // the signal received (SIGINT or SIGTERM), 0 if none

 private:
  int exceptions_at_start_;
  StopSignalScope handlers_;
};

}  // namespace causal
