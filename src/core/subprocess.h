// Child processes of causal (the --nproc ranks, the sweep's points): start one in a process group of its
// own, forward the stop signals this process receives, reap it, and read the error line it printed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "core/stop_signals.h"

namespace causal {

struct SpawnOptions {
  std::vector<std::string> argv;                // the command line the child sees
  std::string executable;                       // the file executed; "" = argv[0]
  std::optional<std::vector<std::string>> env;  // "NAME=value" entries; nullopt: this process's
  int stdout_fd = -1;                           // becomes the child's stdout (-1: inherited)
  int stderr_fd = -1;                           // becomes the child's stderr (-1: inherited)
  bool stop_with_parent = false;                // SIGTERM when this process dies, even by SIGKILL
};

class Subprocess {
 public:
  // Starts the child in a process group of its own, so the terminal's Ctrl-C reaches only this process,
  // which forwards it (ForwardedSignals): every child sees each signal exactly once. A child that cannot
  // execute argv[0] writes "causal: error: cannot execute ..." to its stderr and exits 127. Throws IoError
  // when fork() fails.
  static Subprocess spawn(const SpawnOptions& options);

  pid_t pid() const { return pid_; }
  bool running() const { return !status_; }
  void signal(int signal) const;
  // Reaps the child if it has ended, without blocking; true once it has. Waits for this pid only: a
  // library or test may have children of its own.
  bool poll();
  // After poll() returned true: the exit code a shell reports (128 + the signal that killed it), and
  // "exited with code 3" or "was killed by signal 9 (Killed)".
  int exit_code() const;
  bool killed() const;
  std::string describe() const;

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  std::optional<int> status_;  // waitpid's, once reaped
};

// SIGINT and SIGTERM counted while in scope, for a parent that forwards them to its children. One scope
// at a time per process. After a scope that counted a signal, the counting handler stays installed: the
// parent is on its way to exit with 128 + signal, and a second signal while it writes its summary must not
// kill it with the default action instead.
class ForwardedSignals {
 public:
  ForwardedSignals();
  ~ForwardedSignals();
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;
  struct Arrived {
    int count = 0;   // signals since the last take()
    int signal = 0;  // the newest of them (0 when none)
  };
  Arrived take();

 private:
  int first_;  // read before the handler is installed: earlier signals are not this scope's
  int seen_;
  StopSignalScope scope_;
};

// The text after kErrorPrefix on the last line of `text` that starts with it; "" when none does.
std::string last_error_line(const std::string& text);

}  // namespace causal
