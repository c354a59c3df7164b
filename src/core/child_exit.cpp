// Exit codes and signal names of finished child processes.
#include "core/child_exit.h"

#include <sys/wait.h>

#include <cstring>

#include "core/errors.h"

namespace causal {

int child_exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return kExitFailure;
}

std::string killed_by_signal(int wait_status) {
  const int signal = WTERMSIG(wait_status);
  return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
}

}  // namespace causal
