// Run folder creation, locking and atomic writes.
#include "run/run_folder.h"

#include <fcntl.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "io/append_file.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "io/run_files.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// The refusal of a second writer: the folder, the holder's pid and the lock file (docs/run-folder.md).
RunFolderError locked(const fs::path& dir, const std::string& holder) {
  return RunFolderError("run folder " + dir.string() + " is locked by another causal process (" +
                        (holder.empty() ? "" : "pid " + holder + ", ") + (dir / run_files::kLock).string() +
                        "); wait for it to end or stop it");
}

}  // namespace

bool RunFolder::is_empty_or_absent(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return true;
  return fs::is_directory(dir, ec) && fs::is_empty(dir, ec);
}

void RunFolder::check_writable(const fs::path& dir, int64_t bytes) {
  // The nearest directory that exists: a folder still to be created lands on its file system.
  fs::path existing = dir.empty() ? fs::path(".") : dir;
  std::error_code ec;
  while (!fs::is_directory(existing, ec) && existing.has_parent_path() && existing.parent_path() != existing)
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec)) existing = ".";
  // A real file, not access(2): root passes permission checks but not a read-only mount.
  const fs::path probe = existing / (".causal-write-probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw RunFolderError("run folder " + dir.string() + ": cannot write in " + existing.string() + " (" +
                         std::strerror(errno) +
                         "); expected a writable directory, or choose another --run-dir");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  struct statvfs fs_stats {};
  if (::statvfs(existing.c_str(), &fs_stats) != 0) return;  // unknown: the writes themselves will tell
  const double free_bytes = static_cast<double>(fs_stats.f_bavail) * static_cast<double>(fs_stats.f_frsize);
  if (free_bytes < static_cast<double>(bytes)) {
    constexpr double kMiB = 1024.0 * 1024.0;
    throw RunFolderError(
        fmt::format("run folder {}: its file system ({}) has {:.2f} MiB free, the run needs about {:.2f} MiB "
                    "for checkpoints "
                    "and logs; free space or choose another --run-dir",
                    dir.string(), existing.string(), free_bytes / kMiB, static_cast<double>(bytes) / kMiB));
  }
}

std::unique_ptr<RunFolder> RunFolder::open_existing(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw RunFolderError("run folder " + dir.string() + " does not exist");
  return std::unique_ptr<RunFolder>(new RunFolder(dir));
}

std::unique_ptr<RunFolder> RunFolder::create(const std::string& requested, const std::string& runs_root,
                                             const std::string& name) {
  fs::path dir;
  if (!requested.empty()) {
    dir = requested;
    // A folder a live run holds is named as such, with its writer's pid, whatever else it holds.
    if (const std::optional<std::string> holder = DirLock::held_by(dir / run_files::kLock))
      throw locked(dir, *holder);
    if (!is_empty_or_absent(dir)) {
      throw RunFolderError("run folder " + dir.string() +
                           " already holds a run and no checkpoint of it is being resumed; choose another "
                           "--run-dir (runs are never overwritten)");
    }
  } else {
    dir = fs::path(runs_root) / name;
    for (int i = 2; !is_empty_or_absent(dir); ++i)
      dir = fs::path(runs_root) / (name + "-" + std::to_string(i));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RunFolderError("cannot create run folder " + dir.string() + ": " + ec.message());
  return std::unique_ptr<RunFolder>(new RunFolder(dir));
}

RunFolder::RunFolder(fs::path path) : path_(std::move(path)) {
  const fs::path lock = path_ / run_files::kLock;
  std::string holder;
  lock_ = io_as<RunFolderError>([&] { return DirLock::try_lock(lock, &holder); });
  if (!lock_) throw locked(path_, holder);
  metrics_ = io_as<RunFolderError>([&] { return std::make_unique<AppendFile>(path_ / run_files::kMetrics); });
  auto file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>((path_ / run_files::kLog).string());
  auto console_sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  console_sink->set_level(spdlog::level::info);
  console_sink->set_pattern("%v");
  logger_ = std::make_shared<spdlog::logger>("run", spdlog::sinks_init_list{file_sink, console_sink});
  logger_->set_level(spdlog::level::debug);
  logger_->flush_on(spdlog::level::info);
  // spdlog reports a failed write of log.txt here instead of throwing; the run stops after its step.
  const std::string log_file = (path_ / run_files::kLog).string();
  logger_->set_error_handler([this, log_file](const std::string& message) {
    note_write_failure("[io] cannot write " + log_file + ": " + message);
  });
}

RunFolder::~RunFolder() {
  if (logger_) logger_->flush();
}

void RunFolder::write_json(const std::string& file, const nlohmann::json& value) const {
  io_as<RunFolderError>([&] { write_file_atomically(path_ / file, value.dump(2) + "\n"); });
}

void RunFolder::write_file(const std::string& file, const std::string& bytes) const {
  io_as<RunFolderError>([&] { write_file_atomically(path_ / file, bytes); });
}

void RunFolder::append_metrics(const nlohmann::json& row) {
  // After a failure no row is written: the file keeps every row up to the failed one and nothing after.
  if (!write_failure_.empty()) return;
  try {
    metrics_->append(row.dump() + "\n");
  } catch (const IoError& e) {
    note_write_failure(e.what());
  }
}

void RunFolder::note_write_failure(const std::string& what) {
  if (write_failure_.empty()) write_failure_ = what;
}

void RunFolder::throw_write_failure(int64_t step, const std::string& checkpoint) const {
  throw CheckpointError("run folder " + path_.string() + ": " + write_failure_ + "; stopped after step " +
                        std::to_string(step) + ", " + checkpoint +
                        "; free space, then run the same command with --resume auto to continue");
}

void RunFolder::clear_metrics() {
  const fs::path file = path_ / run_files::kMetrics;
  metrics_.reset();
  io_as<RunFolderError>([&] { write_file_atomically(file, ""); });
  metrics_ = io_as<RunFolderError>([&] { return std::make_unique<AppendFile>(file); });
}

void RunFolder::truncate_metrics_after(int64_t step) {
  const fs::path file = path_ / run_files::kMetrics;
  metrics_.reset();
  std::string kept;
  {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      // A torn last line (crash mid-write) is dropped like the rows after the checkpoint.
      if (row.is_discarded() || row.value("step", int64_t{0}) > step) continue;
      kept += line + "\n";
    }
  }
  io_as<RunFolderError>([&] { write_file_atomically(file, kept); });
  metrics_ = io_as<RunFolderError>([&] { return std::make_unique<AppendFile>(file); });
}

}  // namespace causal
