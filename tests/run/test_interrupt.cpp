// The training loop's signal handlers: what stays installed after the loop, with and without a signal.
#include <catch2/catch.hpp>
#include <csignal>

#include "run/interrupt.h"

namespace {

causal::SignalHandler current_handler(int signal) {
  struct sigaction now {};
  sigaction(signal, nullptr, &now);
  return now.sa_handler;
}

}  // namespace

CATCH_TEST_CASE("the interrupt handlers are restored after a loop that received no signal", "[unit][run]") {
  std::signal(SIGTERM, SIG_DFL);
  {
    causal::InterruptGuard guard;
    CATCH_CHECK(current_handler(SIGTERM) != SIG_DFL);
    CATCH_CHECK(guard.pending() == 0);
  }
  CATCH_CHECK(current_handler(SIGTERM) == SIG_DFL);
}

CATCH_TEST_CASE("after a signal the handlers outlive the loop, so a second one still exits with 128 + signal",
                "[unit][run]") {
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  {
    causal::InterruptGuard guard;
    std::raise(SIGTERM);
    CATCH_CHECK(guard.pending() == SIGTERM);
  }
  // With the default action back, a second SIGTERM while the process exits would kill it by signal.
  CATCH_CHECK(current_handler(SIGTERM) != SIG_DFL);
  CATCH_CHECK(current_handler(SIGINT) != SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
}
