// The console progress line: redrawn in place on a terminal, a plain line every ~10% elsewhere (CI logs).
#pragma once

#include <chrono>
#include <cstdint>

namespace causal {

class ProgressLine {
 public:
  ProgressLine(int64_t first_step, int64_t total_steps);
  // Called after every completed step (1-based count of steps done).
  void update(int64_t steps_done, double loss, double lr, double tokens_per_s);
  void finish();

 private:
  int64_t first_step_;
  int64_t total_;
  bool tty_;
  int64_t next_report_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace causal
