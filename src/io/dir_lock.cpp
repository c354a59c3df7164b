// flock(2)-based folder locks with the holder's pid.
#include "io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errors.h"

namespace causal {
namespace {

// The pid the holder wrote ("" if unreadable or not a number).
std::string read_holder(int fd) {
  char buffer[32] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  std::string text(buffer, n > 0 ? static_cast<size_t>(n) : 0);
  text = text.substr(0, text.find('\n'));
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  return digits ? text : "";
}

}  // namespace

std::unique_ptr<DirLock> DirLock::try_lock(const std::filesystem::path& file, std::string* holder) {
  const int fd = ::open(file.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("[io] cannot open the lock file " + file.string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      if (holder != nullptr) *holder = read_holder(fd);
      ::close(fd);
      return nullptr;
    }
    ::close(fd);
    // ENOLCK: a file system without locks (some network mounts); docs/run-folder.md.
    throw IoError("[io] cannot lock " + file.string() + ": " + std::strerror(error));
  }
  // Best effort: a failed write only costs a later refusal its pid (the flock, not this text, is the lock).
  const std::string pid = std::to_string(::getpid()) + "\n";
  const bool written =
      ::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
  static_cast<void>(written);
  return std::unique_ptr<DirLock>(new DirLock(file, fd));
}

std::optional<std::string> DirLock::held_by(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> holder;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) holder = read_holder(fd);
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return holder;
}

DirLock::~DirLock() {
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

}  // namespace causal
