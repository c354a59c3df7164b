// Signal handlers that only record the signal: everything else happens in the training loop.
#include "run/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace causal {
namespace {

std::atomic<int> g_pending{0};
struct sigaction g_previous_int, g_previous_term;

void on_signal(int signal) {
  int none = 0;
  if (g_pending.compare_exchange_strong(none, signal)) return;
  // A second signal: now, saying so (write and _exit are async-signal-safe; the exit code is a graceful
  // stop's, so this line is what tells the two apart).
  static const char kLine[] =
      "causal: second signal: exiting at once; the last complete checkpoint is kept\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kLine, sizeof(kLine) - 1);
  _exit(128 + signal);
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_pending = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int InterruptGuard::pending() const { return g_pending.load(); }

}  // namespace causal
