// Signal handlers that only record the signal: everything else happens in the training loop.
#include "run/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <exception>

namespace causal {
namespace {

std::atomic<int> g_pending{0};

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

// Clears the pending signal before the handler is installed, so none that arrives after is lost.
SignalHandler cleared_handler() {
  g_pending = 0;
  return on_signal;
}

}  // namespace

InterruptGuard::InterruptGuard()
    : exceptions_at_start_(std::uncaught_exceptions()), handlers_(cleared_handler()) {}

InterruptGuard::~InterruptGuard() {
  if (g_pending.load() != 0 || std::uncaught_exceptions() > exceptions_at_start_) handlers_.keep_installed();
}

int InterruptGuard::pending() const { return g_pending.load(); }

}  // namespace causal
