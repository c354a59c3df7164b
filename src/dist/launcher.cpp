// Local launcher: fork/exec of the ranks, console prefixing, signal forwarding, fail-fast supervision.
#include "dist/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/child_exit.h"
#include "core/stop_signals.h"

extern char** environ;

namespace causal {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_signal_count = 0;

void on_signal(int signal) {
  g_signal = signal;
  g_signal_count = g_signal_count + 1;
}

// One worker's console stream: bytes in, "[rank R] line" out.
struct Stream {
  int fd = -1;
  FILE* to = nullptr;
  std::string pending;  // an incomplete last line
};

struct Worker {
  int64_t rank = 0;
  pid_t pid = -1;
  bool running = true;
  int status = 0;
  Stream out, err;
  std::string last_error;  // the last "causal: error:" line on its stderr (else its last stderr line)
};

void emit_lines(Worker& w, Stream& s, bool flush_partial) {
  size_t start = 0;
  for (size_t end; (end = s.pending.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = s.pending.substr(start, end - start);
    std::fprintf(s.to, "[rank %lld] %s\n", static_cast<long long>(w.rank), line.c_str());
    if (&s == &w.err &&
        (line.rfind("causal: error:", 0) == 0 || w.last_error.rfind("causal: error:", 0) != 0))
      w.last_error = line;
  }
  s.pending.erase(0, start);
  if (flush_partial && !s.pending.empty()) {
    s.pending += '\n';
    emit_lines(w, s, false);
  }
  std::fflush(s.to);
}

// Reads what is available; closes the stream at end of file.
void pump(Worker& w, Stream& s) {
  char buffer[4096];
  const ssize_t n = ::read(s.fd, buffer, sizeof(buffer));
  if (n > 0) {
    s.pending.append(buffer, static_cast<size_t>(n));
    emit_lines(w, s, false);
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    ::close(s.fd);
    s.fd = -1;
    emit_lines(w, s, true);
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was " + killed_by_signal(status);
  return "stopped";
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The environment of rank `rank`: this process's, with torchrun's variables replaced.
std::vector<std::string> worker_environment(int64_t rank, int64_t nproc, int port) {
  const std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(nproc)},
      {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
      {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)}};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : ours) replaced = replaced || entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : ours) env.push_back(name + "=" + value);
  return env;
}

std::string executable_path() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) throw DistributedError("--nproc: cannot resolve /proc/self/exe to start the workers");
  return std::string(buffer, static_cast<size_t>(n));
}

Worker start_worker(int64_t rank, const LocalLaunchOptions& options, int port, const std::string& exe) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0)
    throw DistributedError(std::string("--nproc: pipe() failed: ") + std::strerror(errno));
  // Everything the child needs is built before fork(): after it only async-signal-safe calls are made.
  std::vector<std::string> args = options.command;
  std::vector<std::string> env = worker_environment(rank, options.nproc, port);
  std::vector<char*> argv = pointers(args), envp = pointers(env);
  const pid_t pid = ::fork();
  if (pid < 0) throw DistributedError(std::string("--nproc: fork() failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    ::execve(exe.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Worker w;
  w.rank = rank;
  w.pid = pid;
  w.out = {out_pipe[0], stdout, {}};
  w.err = {err_pipe[0], stderr, {}};
  return w;
}

void signal_running(std::vector<Worker>& workers, int signal) {
  for (Worker& w : workers)
    if (w.running) ::kill(w.pid, signal);
}

}  // namespace

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw DistributedError("--nproc: cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0;
  ::close(fd);
  if (!ok) throw DistributedError("--nproc: cannot bind a loopback port for the rendezvous");
  return ntohs(addr.sin_port);
}

std::vector<std::string> own_command_without_nproc() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int launch_local(const LocalLaunchOptions& options) {
  using Clock = std::chrono::steady_clock;
  const std::string exe = executable_path();
  const int port = free_loopback_port();
  // The workers, in process groups of their own, never see the terminal's Ctrl-C directly, so each
  // receives every signal exactly once (from here).
  StopSignalScope forwarding(on_signal);
  std::vector<Worker> workers;
  for (int64_t rank = 0; rank < options.nproc; ++rank)
    workers.push_back(start_worker(rank, options, port, exe));

  int forwarded = 0;               // signals passed on so far
  const Worker* failed = nullptr;  // the first worker to fail
  Clock::time_point kill_at{};     // after a failure: when the survivors get SIGKILL
  for (;;) {
    while (forwarded < g_signal_count) {
      signal_running(workers, g_signal);
      ++forwarded;
    }
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, Stream*>> owners;
    for (Worker& w : workers) {
      for (Stream* s : {&w.out, &w.err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        owners.emplace_back(&w, s);
      }
    }
    bool any_running = false;
    for (Worker& w : workers) {
      if (!w.running) continue;
      if (::waitpid(w.pid, &w.status, WNOHANG) == w.pid) {
        w.running = false;
        if (child_exit_code(w.status) != 0 && failed == nullptr) {
          failed = &w;
          // Fail fast: the others are asked to stop, then killed if they have not after the grace time.
          signal_running(workers, SIGTERM);
          kill_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000));
        }
      }
      any_running = any_running || w.running;
    }
    if (failed != nullptr && any_running && Clock::now() >= kill_at) signal_running(workers, SIGKILL);
    if (!any_running && fds.empty()) break;
    if (::poll(fds.data(), fds.size(), 100) > 0) {
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0) pump(*owners[i].first, *owners[i].second);
    }
  }
  if (failed == nullptr) return kExitOk;
  std::string error = failed->last_error;
  if (error.rfind("causal: error: ", 0) == 0) error.erase(0, 15);
  if (!error.empty()) error = ": " + error;
  throw WorkerFailed("--nproc " + std::to_string(options.nproc) + ": rank " + std::to_string(failed->rank) +
                         " " + describe_status(failed->status) + error,
                     child_exit_code(failed->status));
}

}  // namespace causal
