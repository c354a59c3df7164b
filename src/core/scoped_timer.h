// Adds the wall time of a scope to a running total: how the loop accounts diagnostics time.
#pragma once

#include <chrono>

namespace causal {

class ScopedTimer {
 public:
  explicit ScopedTimer(double& total_seconds) : total_(total_seconds), start_(Clock::now()) {}
  ~ScopedTimer() { total_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  double& total_;
  Clock::time_point start_;
};

}  // namespace causal
