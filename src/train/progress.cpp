// Progress line rendering.
#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace causal {

ProgressLine::ProgressLine(int64_t first_step, int64_t total_steps)
    : first_step_(first_step),
      total_(total_steps),
      tty_(::isatty(STDERR_FILENO) == 1),
      next_report_(first_step + std::max<int64_t>(1, (total_steps - first_step) / 10)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressLine::update(int64_t steps_done, double loss, double lr, double tokens_per_s) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const bool last = steps_done == total_;
  if (tty_) {
    // Redrawing more than ~10 times a second costs more than it shows.
    if (!last && std::chrono::duration<double>(now - last_draw_).count() < 0.1) return;
  } else if (!last && steps_done < next_report_) {
    return;
  }
  last_draw_ = now;
  const int64_t done_here = steps_done - first_step_;
  const double eta = done_here > 0
                         ? elapsed / static_cast<double>(done_here) * static_cast<double>(total_ - steps_done)
                         : 0.0;
  std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  lr %.3g  %.0f tok/s  elapsed %.1fs  eta %.1fs%s",
               tty_ ? "\r\033[K" : "", static_cast<long long>(steps_done), static_cast<long long>(total_),
               loss, lr, tokens_per_s, elapsed, eta, tty_ ? "" : "\n");
  std::fflush(stderr);
  if (!tty_) next_report_ += std::max<int64_t>(1, (total_ - first_step_) / 10);
}

void ProgressLine::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace causal
