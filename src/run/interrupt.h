// SIGINT/SIGTERM during training: the first signal asks the loop to finish its step, save a checkpoint
// and stop (exit 130/143); a second one exits at once, leaving the last complete checkpoint as it was.
#pragma once

#include "core/errors.h"
#include "core/stop_signals.h"

namespace causal {

// Installs the handlers for its lifetime and restores the previous ones after, unless a signal came: then
// they stay, so that a second signal during the way out (the last checkpoint, the exit) still exits at
// once with 128 + signal instead of dying by the default action. One at a time.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  int pending() const;  // the signal received (SIGINT or SIGTERM), 0 if none

 private:
  StopSignalScope handlers_;
};

}  // namespace causal
