// Whole-line appends for files read while they grow (metrics.jsonl): a line reaches the file whole or
// not at all, so a full disk or an I/O error never leaves half a line for a reader to trip on.
#pragma once

#include <filesystem>
#include <string_view>

namespace causal {

class AppendFile {
 public:
  // Opens `path` for appending (created if absent). Throws IoError naming it.
  explicit AppendFile(const std::filesystem::path& path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  // Appends `bytes` with write(2) (no user-space buffer: a crash loses nothing already appended). When a
  // write fails part way (ENOSPC, EIO, ...) the file is cut back to its length before the call and IoError
  // names the file and the errno text.
  void append(std::string_view bytes);

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace causal
