// The signal handlers of the training loop and of a parent that forwards signals (the --nproc launcher, the
// sweep): what stays installed after their scope, with and without a signal.
#include <catch2/catch.hpp>
#include <csignal>
#include <stdexcept>

#include "core/subprocess.h"
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

CATCH_TEST_CASE("a loop left by an error keeps the handlers, so a first signal cannot kill it unreported",
                "[unit][run]") {
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  try {
    causal::InterruptGuard guard;
    throw std::runtime_error("step 3: non-finite loss");
  } catch (const std::runtime_error&) {
    // The error is reported here; a SIGTERM from the launcher meanwhile is only recorded.
    CATCH_CHECK(current_handler(SIGTERM) != SIG_DFL);
    CATCH_CHECK(current_handler(SIGINT) != SIG_DFL);
    std::raise(SIGTERM);
  }
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  // A guard made while another exception is already in flight restores on its own normal exit.
  struct Unwinding {
    ~Unwinding() {
      { causal::InterruptGuard inner; }
      restored = current_handler(SIGTERM) == SIG_DFL;
    }
    bool& restored;
  };
  bool restored = false;
  try {
    Unwinding u{restored};
    throw std::runtime_error("outer");
  } catch (const std::runtime_error&) {
  }
  CATCH_CHECK(restored);
}

CATCH_TEST_CASE("a forwarding parent's handler is restored without a signal and kept after one",
                "[unit][run]") {
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  { causal::ForwardedSignals quiet; }
  CATCH_CHECK(current_handler(SIGTERM) == SIG_DFL);
  {
    causal::ForwardedSignals signals;
    std::raise(SIGINT);
    const causal::ForwardedSignals::Arrived arrived = signals.take();
    CATCH_CHECK(arrived.count == 1);
    CATCH_CHECK(arrived.signal == SIGINT);
  }
  CATCH_CHECK(current_handler(SIGTERM) != SIG_DFL);
  CATCH_CHECK(current_handler(SIGINT) != SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
}
