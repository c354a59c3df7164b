// The sweep runner: one `causal train --run-dir out/<point> --resume auto` child process per point.
#include "run/sweep.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "config/config_io.h"
#include "core/child_exit.h"
#include "core/errors.h"
#include "core/runtime.h"
#include "core/stop_signals.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "model/autocast_scope.h"
#include "train/throughput.h"

namespace causal {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Signals reach the sweep alone (each point runs in its own process group, so a terminal's Ctrl-C is
// not delivered twice); the loop forwards each one it sees.
std::atomic<int> g_signals{0};
std::atomic<int> g_last_signal{0};

void on_sweep_signal(int signal) {
  g_last_signal = signal;
  ++g_signals;
}

// Held for the whole sweep: two sweeps in one folder would train the same points twice.
std::unique_ptr<DirLock> lock_sweep_folder(const fs::path& out) {
  const fs::path file = out / ".sweep-lock";
  std::string holder;
  std::unique_ptr<DirLock> lock = io_as<RunFolderError>([&] { return DirLock::try_lock(file, &holder); });
  if (!lock) {
    throw RunFolderError("sweep folder " + out.string() + " is in use by another causal sweep" +
                         (holder.empty() ? "" : " (pid " + holder + ")") + "; wait for it to end or stop it");
  }
  return lock;
}

std::optional<json> read_json_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  json value = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// A point's folder that holds a finished run of another config is never reused silently.
void check_finished_point(const PointResult& p, const RunConfig& config) {
  const std::optional<json> stored = read_json_file(fs::path(p.run_dir) / "config.json");
  if (!stored) return;
  const std::vector<std::string> differences =
      config_differences(*stored, config_to_json(config), {"model", "data", "train", "seed"});
  if (differences.empty()) return;
  std::string first = differences.front();
  if (const auto at = first.find(": checkpoint "); at != std::string::npos)
    first.replace(at, 13, ": its config.json ");
  throw RunFolderError(
      "sweep point " + p.point.name + ": " + p.run_dir + " holds a finished run of another config (" + first +
      (differences.size() > 1 ? ", and " + std::to_string(differences.size() - 1) + " more" : "") +
      "); choose another --out (runs are never overwritten)");
}

// The last "causal: error: ..." line the child wrote after `from` in its log, without the prefix.
std::string point_error_line(const fs::path& log, std::streamoff from) {
  std::ifstream in(log);
  in.seekg(from);
  std::string line, found;
  constexpr const char* kPrefix = "causal: error: ";
  while (std::getline(in, line)) {
    if (line.rfind(kPrefix, 0) == 0) found = line.substr(std::strlen(kPrefix));
  }
  return found;
}

struct SweepChild {
  pid_t pid = -1;
  size_t index = 0;
  std::streamoff log_start = 0;
  std::chrono::steady_clock::time_point started;
};

// fork + exec of `argv`, its stdout and stderr appended to `log`. Only async-signal-safe calls between
// fork and exec: everything is prepared before.
pid_t spawn_point(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("cannot open " + log.string() + ": " + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw IoError(std::string("cannot start a sweep point: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);                     // the terminal's signals go to the sweep, which forwards them
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a sweep killed outright still stops its points cleanly
    if (::getppid() != parent) ::_exit(143);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    static const char kFailed[] = "causal: error: sweep: cannot execute the causal binary\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kFailed, sizeof(kFailed) - 1);
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

std::vector<std::string> child_args(const SweepSpec& spec, const PointResult& p, const RunConfig& config,
                                    const std::string& executable) {
  std::vector<std::string> args{executable, "train", "--config", fs::absolute(spec.config).string()};
  for (const std::string& s : spec.set) args.insert(args.end(), {"--set", s});
  for (const std::string& s : p.point.overrides()) args.insert(args.end(), {"--set", s});
  if (config.threads == 0) args.insert(args.end(), {"--set", "threads=" + std::to_string(p.threads)});
  args.insert(args.end(), {"--run-dir", p.run_dir, "--resume", "auto"});
  return args;
}

}  // namespace

const char* point_state_name(PointState state) {
  switch (state) {
    case PointState::kPending:
      return "pending";
    case PointState::kRunning:
      return "running";
    case PointState::kFinished:
      return "finished";
    case PointState::kSkipped:
      return "skipped";
    case PointState::kFailed:
      return "failed";
    case PointState::kStopped:
      return "stopped";
  }
  return "?";
}

size_t SweepOutcome::failed() const {
  size_t n = 0;
  for (const PointResult& p : points) n += p.state == PointState::kFailed ? 1 : 0;
  return n;
}

SweepOutcome run_sweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                       const std::vector<RunConfig>& configs, const SweepOptions& options,
                       const SweepObserver& observer) {
  if (options.jobs < 1)
    throw UsageError("--jobs " + std::to_string(options.jobs) + ": expected an integer >= 1");
  const fs::path out = spec.out;
  std::error_code ec;
  fs::create_directories(out / "logs", ec);
  if (ec) throw RunFolderError("cannot create sweep folder " + out.string() + ": " + ec.message());
  const std::unique_ptr<DirLock> lock = lock_sweep_folder(out);

  const int64_t cores =
      options.cores > 0 ? options.cores : std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t share = std::max<int64_t>(1, cores / options.jobs);
  SweepOutcome outcome;
  for (size_t i = 0; i < points.size(); ++i) {
    PointResult p;
    p.point = points[i];
    p.run_dir = (out / points[i].name).string();
    p.log = (out / "logs" / (points[i].name + ".log")).string();
    p.threads = configs[i].threads > 0 ? configs[i].threads : share;
    if (fs::exists(fs::path(p.run_dir) / "results.json")) {
      check_finished_point(p, configs[i]);
      if (std::optional<json> results = read_json_file(fs::path(p.run_dir) / "results.json")) {
        p.state = PointState::kSkipped;
        p.results = *results;
      }
    }
    outcome.points.push_back(std::move(p));
  }
  io_as<RunFolderError>(
      [&] { write_file_atomically(out / "sweep.json", sweep_to_json(spec, points).dump(2) + "\n"); });

  const size_t total = outcome.points.size();
  auto say = [&](const std::string& line) {
    if (options.progress) *options.progress << "[sweep] " << line << "\n" << std::flush;
  };
  auto numbered = [&](size_t i) {
    return std::to_string(i + 1) + "/" + std::to_string(total) + " " + outcome.points[i].point.name;
  };
  for (size_t i = 0; i < total; ++i) {
    if (outcome.points[i].state == PointState::kSkipped) say(numbered(i) + ": finished earlier, skipped");
  }
  if (observer) observer(outcome.points);
  // Points measuring the matmul peak together would each see the others' load: it is measured once, here.
  const auto first_to_run =
      std::find_if(outcome.points.begin(), outcome.points.end(),
                   [](const PointResult& p) { return p.state != PointState::kSkipped; });
  if (first_to_run != outcome.points.end()) {
    const size_t i = static_cast<size_t>(first_to_run - outcome.points.begin());
    // Only one peak can be passed down: points on other devices or dtypes measure their own.
    bool shared = true;
    for (size_t j = i; j < outcome.points.size(); ++j)
      shared &=
          outcome.points[j].state == PointState::kSkipped ||
          (configs[j].device == configs[i].device && configs[j].model.autocast == configs[i].model.autocast);
    if (shared) {
      const MatmulPeak peak =
          matmul_peak(resolve_device(configs[i].device), products_dtype(configs[i].model.autocast));
      const std::string gflops = std::to_string(peak.flops / 1e9);
      ::setenv(kMatmulPeakVariable, gflops.c_str(), 1);
      say("matmul peak " + gflops.substr(0, gflops.find('.') + 2) + " GFLOP/s (" + peak.source +
          "), passed to every point as " + kMatmulPeakVariable);
    } else {
      say("points differ in device or model.autocast: each measures its own matmul peak");
    }
  }

  g_signals = 0;
  g_last_signal = 0;
  StopSignalScope forwarding(on_sweep_signal);
  std::vector<SweepChild> running;
  size_t next = 0;
  int forwarded = 0;
  while (true) {
    const int signals = g_signals.load();
    if (signals > forwarded) {
      outcome.signal = g_last_signal.load();
      for (const SweepChild& c : running) ::kill(c.pid, outcome.signal);
      if (forwarded == 0 && !running.empty())
        say(std::string(strsignal(outcome.signal)) + ": stopping the running points after their checkpoint");
      forwarded = signals;
    }
    while (outcome.signal == 0 && static_cast<int64_t>(running.size()) < options.jobs && next < total) {
      const size_t i = next++;
      PointResult& p = outcome.points[i];
      if (p.state == PointState::kSkipped) continue;
      std::error_code size_ec;
      const auto log_start =
          fs::exists(p.log) ? static_cast<std::streamoff>(fs::file_size(p.log, size_ec)) : 0;
      const bool resuming = fs::is_directory(fs::path(p.run_dir) / "checkpoints");
      const pid_t pid = spawn_point(child_args(spec, p, configs[i], options.executable), p.log);
      p.state = PointState::kRunning;
      running.push_back({pid, i, log_start, std::chrono::steady_clock::now()});
      say(numbered(i) + ": " + (resuming ? "resuming" : "started") + " (" + std::to_string(p.threads) +
          " threads, log " + p.log + ")");
    }
    if (running.empty()) break;
    // Each point's own pid, never -1: a library or test may have children of its own to reap.
    int status = 0;
    auto it = running.begin();
    while (it != running.end() && ::waitpid(it->pid, &status, WNOHANG) != it->pid) ++it;
    if (it == running.end()) {
      // Polled rather than blocking, so a signal that lands just before the wait is forwarded at once.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const SweepChild child = *it;
    running.erase(it);
    PointResult& p = outcome.points[child.index];
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - child.started).count();
    p.exit_code = child_exit_code(status);
    const std::string how =
        WIFEXITED(status) ? "exit " + std::to_string(p.exit_code) : killed_by_signal(status);
    char took[32];
    std::snprintf(took, sizeof(took), "%.1fs", p.seconds);
    if (p.exit_code == 0) {
      if (std::optional<json> results = read_json_file(fs::path(p.run_dir) / "results.json")) {
        p.state = PointState::kFinished;
        p.results = *results;
        say(numbered(child.index) + ": finished in " + took);
      } else {
        p.state = PointState::kFailed;
        p.exit_code = kExitFailure;
        p.error = "exited 0 without a readable " + p.run_dir + "/results.json";
        say(numbered(child.index) + ": FAILED: " + p.error);
      }
    } else if (outcome.signal != 0 && (p.exit_code == 130 || p.exit_code == 143)) {
      p.state = PointState::kStopped;
      p.error = point_error_line(p.log, child.log_start);
      say(numbered(child.index) + ": stopped (" + how + "); run the sweep again to continue it");
    } else {
      p.state = PointState::kFailed;
      p.error = point_error_line(p.log, child.log_start);
      if (p.error.empty()) p.error = how;
      say(numbered(child.index) + ": FAILED (" + how + ") after " + took + ": " + p.error + " (log " + p.log +
          ")");
    }
    if (observer) observer(outcome.points);
  }
  return outcome;
}

}  // namespace causal
