// Synced and atomic file writes.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace causal {
namespace fs = std::filesystem;
namespace {

std::string errno_text() { return std::strerror(errno); }

void write_stream(const fs::path& path, const FileWriter& write) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError("[io] cannot open " + path.string() + " for writing: " + errno_text());
  errno = 0;
  write(out);
  out.flush();
  // errno of the failed write(2) (ENOSPC on a full disk): the stream itself keeps no reason.
  const int write_errno = errno;
  if (!out) {
    throw IoError("[io] cannot write " + path.string() + ": " +
                  (write_errno ? std::strerror(write_errno) : "disk full or I/O error"));
  }
  out.close();
  if (out.fail()) throw IoError("[io] cannot close " + path.string());
}

FileWriter bytes_writer(std::string_view bytes) {
  return [bytes](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); };
}

}  // namespace

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("[io] cannot open " + path.string() + " to fsync it: " + errno_text());
  const int rc = ::fsync(fd);
  const std::string err = rc != 0 ? errno_text() : "";
  ::close(fd);
  if (rc != 0) throw IoError("[io] fsync failed for " + path.string() + ": " + err);
}

void write_file_synced(const fs::path& path, std::string_view bytes) {
  write_file_synced(path, bytes_writer(bytes));
}

void write_file_synced(const fs::path& path, const FileWriter& write) {
  write_stream(path, write);
  fsync_path(path);
}

void write_file_atomically(const fs::path& path, std::string_view bytes) {
  write_file_atomically(path, bytes_writer(bytes));
}

void write_file_atomically(const fs::path& path, const FileWriter& write) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  // Same directory as the target, so the rename is atomic; the pid keeps concurrent writers apart.
  const fs::path temp = dir / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()));
  try {
    write_file_synced(temp, write);
    std::error_code ec;
    fs::rename(temp, path, ec);
    if (ec)
      throw IoError("[io] cannot rename " + temp.string() + " over " + path.string() + ": " + ec.message());
    fsync_path(dir);
  } catch (...) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw;
  }
}

void write_folder_atomically(const fs::path& path, const std::function<void(const fs::path& temp)>& write) {
  const fs::path temp =
      path.parent_path() / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(temp);
  try {
    fs::create_directories(temp);
    write(temp);
    fsync_path(temp);
    fs::rename(temp, path);
    fsync_path(path.parent_path());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(temp, ec);
    throw;
  }
}

}  // namespace causal
