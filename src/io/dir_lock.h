// One writer per folder: an advisory flock(2) on a lock file inside it, held for the process's life. The
// kernel drops it when the process ends, however it ends (kill -9 included), so a crash never blocks a
// restart. The holder writes its pid into the file for the refusal another process reports.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace causal {

class DirLock {
 public:
  // Takes the lock on `file` (created if absent) without waiting and writes this process's pid into it.
  // Returns nullptr when another process holds it, with that process's pid in `holder` ("" when it could
  // not be read). Throws IoError naming the file when it cannot be opened or locked for another reason.
  static std::unique_ptr<DirLock> try_lock(const std::filesystem::path& file, std::string* holder);
  // Whether another process holds the lock on an existing `file`, without taking it or writing anything:
  // that process's pid ("" when unreadable), or nullopt when the file is absent or free.
  static std::optional<std::string> held_by(const std::filesystem::path& file);
  ~DirLock();  // releases the lock (the file stays: removing it would race with a process taking it)
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  const std::filesystem::path& file() const { return file_; }

 private:
  DirLock(std::filesystem::path file, int fd) : file_(std::move(file)), fd_(fd) {}
  std::filesystem::path file_;
  int fd_ = -1;
};

}  // namespace causal
