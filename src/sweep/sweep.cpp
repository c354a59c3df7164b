// The sweep runner: one `causal train --run-dir out/<point> --resume auto` child process per point.
#include "sweep/sweep.h"

#include <fcntl.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <ostream>
#include <thread>

#include "bench/matmul_peak.h"
#include "checkpoint/checkpoint.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/runtime.h"
#include "core/subprocess.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "io/run_files.h"
#include "model/autocast_scope.h"

namespace causal {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

std::optional<json> read_json_if_valid(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  json value = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// A point's folder that holds a finished run of another config is never reused silently.
void check_finished_point(const PointResult& p, const RunConfig& config) {
  const std::optional<json> stored = read_json_if_valid(fs::path(p.run_dir) / run_files::kConfig);
  if (!stored) return;
  const std::vector<std::string> differences = config_differences(
      *stored, config_to_json(config), {"model", "data", "train", "seed"}, "its config.json");
  if (differences.empty()) return;
  throw RunFolderError("sweep point " + p.point.name + ": " + p.run_dir +
                       " holds a finished run of another config (" + first_differences(differences) +
                       "); choose another --out (runs are never overwritten)");
}

// The reason the child gave, as the text after the prefix of the last error line it wrote to its log
// after `from`.
std::string point_error_line(const fs::path& log, std::streamoff from) {
  std::ifstream in(log);
  in.seekg(from);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return last_error_line(text);
}

struct SweepChild {
  Subprocess process;
  size_t index = 0;
  std::streamoff log_start = 0;
  std::chrono::steady_clock::time_point started;
};

// The point's `causal train`, its stdout and stderr appended to `log`; stopped with the sweep even when
// the sweep is killed outright.
Subprocess spawn_point(const std::vector<std::string>& args, const fs::path& log) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("cannot open " + log.string() + ": " + std::strerror(errno));
  SpawnOptions spawn;
  spawn.argv = args;
  spawn.stdout_fd = fd;
  spawn.stderr_fd = fd;
  spawn.stop_with_parent = true;
  try {
    Subprocess child = Subprocess::spawn(spawn);
    ::close(fd);
    return child;
  } catch (...) {
    ::close(fd);
    throw;
  }
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

using Say = std::function<void(const std::string&)>;

// The points as this sweep finds them: folders, logs, threads, and those finished earlier (skipped).
std::vector<PointResult> point_results(const fs::path& out, const std::vector<SweepPoint>& points,
                                       const std::vector<RunConfig>& configs, const SweepOptions& options) {
  const int64_t cores =
      options.cores > 0 ? options.cores : std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t share = std::max<int64_t>(1, cores / options.jobs);
  std::vector<PointResult> results;
  for (size_t i = 0; i < points.size(); ++i) {
    PointResult p;
    p.point = points[i];
    p.run_dir = (out / points[i].name).string();
    p.log = (out / "logs" / (points[i].name + ".log")).string();
    p.threads = configs[i].threads > 0 ? configs[i].threads : share;
    if (fs::exists(fs::path(p.run_dir) / run_files::kResults)) {
      check_finished_point(p, configs[i]);
      if (std::optional<json> finished = read_json_if_valid(fs::path(p.run_dir) / run_files::kResults)) {
        p.state = PointState::kSkipped;
        p.results = *finished;
      }
    }
    results.push_back(std::move(p));
  }
  return results;
}

// Points measuring the matmul peak together would each see the others' load: it is measured once, here,
// and passed down, when every point to run shares one device and dtype.
void pass_down_matmul_peak(const std::vector<PointResult>& points, const std::vector<RunConfig>& configs,
                           const Say& say) {
  const auto first = std::find_if(points.begin(), points.end(),
                                  [](const PointResult& p) { return p.state != PointState::kSkipped; });
  if (first == points.end()) return;
  const size_t i = static_cast<size_t>(first - points.begin());
  bool shared = true;
  for (size_t j = i; j < points.size(); ++j) {
    shared &=
        points[j].state == PointState::kSkipped ||
        (configs[j].device == configs[i].device && configs[j].model.autocast == configs[i].model.autocast);
  }
  if (!shared) {
    say("points differ in device or model.autocast: each measures its own matmul peak");
    return;
  }
  const MatmulPeak peak =
      matmul_peak(resolve_device(configs[i].device), products_dtype(configs[i].model.autocast));
  const std::string gflops = std::to_string(peak.flops / 1e9);
  ::setenv(kMatmulPeakVariable, gflops.c_str(), 1);
  say("matmul peak " + gflops.substr(0, gflops.find('.') + 2) + " GFLOP/s (" + peak.source +
      "), passed to every point as " + kMatmulPeakVariable);
}

// What a point's end means: finished (with a readable results.json), stopped by the sweep's own signal,
// or failed with the reason its log gives.
void record_point_end(PointResult& p, const SweepChild& child, int sweep_signal, const std::string& name,
                      const Say& say) {
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - child.started).count();
  p.exit_code = child.process.exit_code();
  const std::string how =
      child.process.killed() ? child.process.describe() : "exit " + std::to_string(p.exit_code);
  const std::string took = fmt::format("{:.1f}s", p.seconds);
  if (p.exit_code == 0) {
    if (std::optional<json> results = read_json_if_valid(fs::path(p.run_dir) / run_files::kResults)) {
      p.state = PointState::kFinished;
      p.results = *results;
      say(name + ": finished in " + took);
    } else {
      p.state = PointState::kFailed;
      p.exit_code = kExitFailure;
      p.error = "exited 0 without a readable " + p.run_dir + "/" + run_files::kResults;
      say(name + ": FAILED: " + p.error);
    }
  } else if (sweep_signal != 0 && (p.exit_code == 128 + SIGINT || p.exit_code == 128 + SIGTERM)) {
    p.state = PointState::kStopped;
    p.error = point_error_line(p.log, child.log_start);
    say(name + ": stopped (" + how + "); run the sweep again to continue it");
  } else {
    p.state = PointState::kFailed;
    p.error = point_error_line(p.log, child.log_start);
    if (p.error.empty()) p.error = how;
    say(name + ": FAILED (" + how + ") after " + took + ": " + p.error + " (log " + p.log + ")");
  }
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

  SweepOutcome outcome;
  outcome.points = point_results(out, points, configs, options);
  io_as<RunFolderError>(
      [&] { write_file_atomically(out / "sweep.json", sweep_to_json(spec, points).dump(2) + "\n"); });
  const size_t total = outcome.points.size();
  const Say say = [&](const std::string& line) {
    if (options.progress) *options.progress << "[sweep] " << line << "\n" << std::flush;
  };
  auto numbered = [&](size_t i) {
    return std::to_string(i + 1) + "/" + std::to_string(total) + " " + outcome.points[i].point.name;
  };
  for (size_t i = 0; i < total; ++i) {
    if (outcome.points[i].state == PointState::kSkipped) say(numbered(i) + ": finished earlier, skipped");
  }
  if (observer) observer(outcome.points);
  pass_down_matmul_peak(outcome.points, configs, say);

  ForwardedSignals signals;
  std::vector<SweepChild> running;
  size_t next = 0;
  while (true) {
    if (const ForwardedSignals::Arrived arrived = signals.take(); arrived.count > 0) {
      if (outcome.signal == 0 && !running.empty())
        say(std::string(strsignal(arrived.signal)) + ": stopping the running points after their checkpoint");
      outcome.signal = arrived.signal;
      for (const SweepChild& c : running) c.process.signal(outcome.signal);
    }
    while (outcome.signal == 0 && static_cast<int64_t>(running.size()) < options.jobs && next < total) {
      const size_t i = next++;
      PointResult& p = outcome.points[i];
      if (p.state == PointState::kSkipped) continue;
      std::error_code size_ec;
      const auto log_start =
          fs::exists(p.log) ? static_cast<std::streamoff>(fs::file_size(p.log, size_ec)) : 0;
      const bool resuming = fs::is_directory(fs::path(p.run_dir) / run_files::kCheckpoints);
      Subprocess child = spawn_point(child_args(spec, p, configs[i], options.executable), p.log);
      p.state = PointState::kRunning;
      running.push_back({child, i, log_start, std::chrono::steady_clock::now()});
      say(numbered(i) + ": " + (resuming ? "resuming" : "started") + " (" + std::to_string(p.threads) +
          " threads, log " + p.log + ")");
    }
    if (running.empty()) break;
    auto it = running.begin();
    while (it != running.end() && !it->process.poll()) ++it;
    if (it == running.end()) {
      // Polled rather than blocking, so a signal that lands just before the wait is forwarded at once.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const SweepChild child = *it;
    running.erase(it);
    record_point_end(outcome.points[child.index], child, outcome.signal, numbered(child.index), say);
    if (observer) observer(outcome.points);
  }
  return outcome;
}

}  // namespace causal
