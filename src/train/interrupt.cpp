// Signal handlers that only record the signal: everything else happens in the training loop.
#include "train/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace causal {
namespace {

std::atomic<int> g_pending{0};
struct sigaction g_previous_int, g_previous_term;

void on_signal(int signal) {
  int none = 0;
  if (!g_pending.compare_exchange_strong(none, signal)) _exit(128 + signal);  // second signal: now
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
