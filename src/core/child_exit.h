// How a child process ended, from its waitpid status: the launcher and the sweep report their children
// the same way.
#pragma once

#include <string>

namespace causal {

// The exit code a shell reports: the child's own, or 128 + the signal that killed it (1 otherwise).
int child_exit_code(int wait_status);
// "killed by signal 9 (Killed)"; call only when WIFSIGNALED(wait_status).
std::string killed_by_signal(int wait_status);

}  // namespace causal
