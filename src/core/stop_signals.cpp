// Installing and restoring the SIGINT/SIGTERM handlers.
#include "core/stop_signals.h"

namespace causal {

StopSignalScope::StopSignalScope(SignalHandler handler) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

StopSignalScope::~StopSignalScope() {
  if (!restore_) return;
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

}  // namespace causal
