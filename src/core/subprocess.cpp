// Child processes: fork/exec into a process group of their own, signal forwarding, reaping.
#include "core/subprocess.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sstream>

#include "core/errors.h"

extern char** environ;

namespace causal {
namespace {

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

volatile std::sig_atomic_t g_signal_count = 0;
volatile std::sig_atomic_t g_last_signal = 0;

void count_signal(int signal) {
  g_last_signal = signal;
  g_signal_count = g_signal_count + 1;
}

}  // namespace

Subprocess Subprocess::spawn(const SpawnOptions& options) {
  // Everything the child needs is built before fork(): after it only async-signal-safe calls are made.
  const std::vector<char*> argv = pointers(options.argv);
  const std::vector<char*> envp = options.env ? pointers(*options.env) : std::vector<char*>{};
  const std::string executable = options.executable.empty() ? options.argv.at(0) : options.executable;
  const std::string failed = std::string(kErrorPrefix) + "cannot execute " + executable + "\n";
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw IoError("cannot start " + executable + ": fork: " + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    if (options.stop_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the parent died before prctl took effect
    }
    if (options.stdout_fd >= 0) ::dup2(options.stdout_fd, STDOUT_FILENO);
    if (options.stderr_fd >= 0) ::dup2(options.stderr_fd, STDERR_FILENO);
    ::execve(executable.c_str(), argv.data(), options.env ? envp.data() : environ);
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, failed.data(), failed.size());
    ::_exit(127);
  }
  return Subprocess(pid);
}

void Subprocess::signal(int signal) const {
  if (running()) ::kill(pid_, signal);
}

bool Subprocess::poll() {
  if (status_) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
  status_ = status;
  return true;
}

int Subprocess::exit_code() const {
  const int status = status_.value_or(0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

bool Subprocess::killed() const { return status_ && WIFSIGNALED(*status_); }

std::string Subprocess::describe() const {
  const int status = status_.value_or(0);
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    return "was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  return "stopped";
}

ForwardedSignals::ForwardedSignals() : first_(g_signal_count), seen_(first_), scope_(count_signal) {}

ForwardedSignals::~ForwardedSignals() {
  if (g_signal_count != first_) scope_.keep_installed();
}

ForwardedSignals::Arrived ForwardedSignals::take() {
  const int count = g_signal_count;
  Arrived arrived{count - seen_, count > seen_ ? static_cast<int>(g_last_signal) : 0};
  seen_ = count;
  return arrived;
}

std::string last_error_line(const std::string& text) {
  std::istringstream lines(text);
  std::string line, found;
  const std::string prefix = kErrorPrefix;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0) found = line.substr(prefix.size());
  }
  return found;
}

}  // namespace causal
