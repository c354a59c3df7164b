// Local launcher: the ranks as child processes, console prefixing, signal forwarding, fail-fast supervision.
#include "dist/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/errors.h"
#include "core/subprocess.h"

extern char** environ;

namespace causal {
namespace {

// One worker's console stream: bytes in, "[rank R] line" out.
struct Stream {
  int fd = -1;
  FILE* to = nullptr;
  std::string pending;  // an incomplete last line
};

struct Worker {
  int64_t rank = 0;
  Subprocess process;
  Stream out, err;
  std::string stderr_tail;  // its last kStderrTail bytes of stderr: the error line is the last one
};

constexpr size_t kStderrTail = 16 << 10;

void emit_lines(Worker& w, Stream& s, bool flush_partial) {
  size_t start = 0;
  for (size_t end; (end = s.pending.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = s.pending.substr(start, end - start);
    std::fprintf(s.to, "[rank %lld] %s\n", static_cast<long long>(w.rank), line.c_str());
    if (&s == &w.err) {
      w.stderr_tail += line + "\n";
      if (w.stderr_tail.size() > kStderrTail) w.stderr_tail.erase(0, w.stderr_tail.size() - kStderrTail);
    }
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

// Why a worker failed: its error line, else its last line on stderr.
std::string failure_reason(const Worker& w) {
  std::string reason = last_error_line(w.stderr_tail);
  if (reason.empty() && !w.stderr_tail.empty()) {
    const size_t end = w.stderr_tail.size() - 1;  // the final newline
    const size_t start = w.stderr_tail.rfind('\n', end - 1);
    reason = w.stderr_tail.substr(start == std::string::npos ? 0 : start + 1,
                                  end - (start == std::string::npos ? 0 : start + 1));
  }
  return reason;
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
  // Close-on-exec: the child keeps only the ends dup2 gives it as stdout and stderr.
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw DistributedError(std::string("--nproc: pipe() failed: ") + std::strerror(errno));
  SpawnOptions spawn;
  spawn.argv = options.command;
  spawn.executable = exe;
  spawn.env = worker_environment(rank, options.nproc, port);
  spawn.stdout_fd = out_pipe[1];
  spawn.stderr_fd = err_pipe[1];
  Worker w{rank, Subprocess::spawn(spawn), {out_pipe[0], stdout, {}}, {err_pipe[0], stderr, {}}, {}};
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  return w;
}

void signal_running(std::vector<Worker>& workers, int signal) {
  for (Worker& w : workers) w.process.signal(signal);
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
  ForwardedSignals signals;
  std::vector<Worker> workers;
  for (int64_t rank = 0; rank < options.nproc; ++rank)
    workers.push_back(start_worker(rank, options, port, exe));

  const Worker* failed = nullptr;  // the first worker to fail
  Clock::time_point kill_at{};     // after a failure: when the survivors get SIGKILL
  for (;;) {
    for (ForwardedSignals::Arrived a = signals.take(); a.count > 0; --a.count)
      signal_running(workers, a.signal);
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
      if (!w.process.running()) continue;
      if (w.process.poll() && w.process.exit_code() != 0 && failed == nullptr) {
        failed = &w;
        // Fail fast: the others are asked to stop, then killed if they have not after the grace time.
        signal_running(workers, SIGTERM);
        kill_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000));
      }
      any_running = any_running || w.process.running();
    }
    if (failed != nullptr && any_running && Clock::now() >= kill_at) signal_running(workers, SIGKILL);
    if (!any_running && fds.empty()) break;
    if (::poll(fds.data(), fds.size(), 100) > 0) {
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents != 0) pump(*owners[i].first, *owners[i].second);
    }
  }
  if (failed == nullptr) return kExitOk;
  const std::string reason = failure_reason(*failed);
  throw WorkerFailed("--nproc " + std::to_string(options.nproc) + ": rank " + std::to_string(failed->rank) +
                         " " + failed->process.describe() + (reason.empty() ? "" : ": " + reason),
                     failed->process.exit_code());
}

}  // namespace causal
