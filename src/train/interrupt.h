// SIGINT/SIGTERM during training: the first signal asks the loop to finish its step, save a checkpoint
// and stop (exit 130/143); a second one exits at once, leaving the last complete checkpoint as it was.
#pragma once

#include <stdexcept>
#include <string>

namespace causal {

// Thrown after the checkpoint of an interrupted run was written; exit_code is 128 + signal number.
class InterruptedRun : public std::runtime_error {
 public:
  InterruptedRun(const std::string& message, int exit_code)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Installs the handlers for its lifetime and restores the previous ones after. One at a time.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  int pending() const;  // the signal received (SIGINT or SIGTERM), 0 if none
};

}  // namespace causal
