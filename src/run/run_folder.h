// The run folder (runs/NAME/): created once per run, locked while training, written atomically.
#pragma once

#include <spdlog/logger.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.h"
#include "io/append_file.h"
#include "io/dir_lock.h"
#include "train/train_output.h"

namespace causal {

class RunFolder : public TrainOutput {
 public:
  // `requested` empty: a new folder runs_root/name (or name-2, name-3, ... if taken). Otherwise that
  // folder, which must be empty or absent: an earlier run is never overwritten.
  static std::unique_ptr<RunFolder> create(const std::string& requested, const std::string& runs_root,
                                           const std::string& name);
  // An existing run folder, to continue a run in it (resume). Throws RunFolderError if it is locked.
  static std::unique_ptr<RunFolder> open_existing(const std::filesystem::path& dir);
  static bool is_empty_or_absent(const std::filesystem::path& dir);
  // Before training starts: the file system that holds (or will hold) `dir` must take a new file and have
  // `bytes` free, else RunFolderError names the directory, the errno text or the free and needed space.
  static void check_writable(const std::filesystem::path& dir, int64_t bytes);
  ~RunFolder() override;
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `file` in the folder via a temporary and a rename, so readers never see half a file.
  void write_json(const std::string& file, const nlohmann::json& value) const;
  void write_file(const std::string& file, const std::string& bytes) const;  // atomically, like write_json
  // One line of metrics.jsonl, written whole at once so a crash loses nothing already logged. A failed
  // write (ENOSPC, EIO) leaves no part of the row; it is recorded (write_failure) instead of thrown, so
  // the step in progress ends and the run stops there with a last checkpoint.
  void append_metrics(const nlohmann::json& row) override;
  // The first failed write of metrics.jsonl or log.txt ("" while none): the run must stop.
  const std::string& write_failure() const { return write_failure_; }
  // The run's exit after a write failure: CheckpointError (exit 4) naming the file and the errno text,
  // the step it stopped after and `checkpoint` (what became of the last checkpoint).
  [[noreturn]] void throw_write_failure(int64_t step, const std::string& checkpoint) const;
  // Drops metrics rows logged after `step` (a resumed run repeats those steps); rewritten atomically.
  void truncate_metrics_after(int64_t step);
  // Empties metrics.jsonl (a run restarted from step 0 logs every step again); rewritten atomically.
  void clear_metrics();
  // Logs to log.txt (everything) and stderr (info and above).
  spdlog::logger& log() override { return *logger_; }

 private:
  explicit RunFolder(std::filesystem::path path);
  std::filesystem::path path_;
  std::unique_ptr<DirLock> lock_;  // declared before the files: released only after they are closed
  void note_write_failure(const std::string& what);
  std::unique_ptr<AppendFile> metrics_;
  std::shared_ptr<spdlog::logger> logger_;
  std::string write_failure_;
};

}  // namespace causal
