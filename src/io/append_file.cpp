// Appends that never leave a partial line behind.
#include "io/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/errors.h"

namespace causal {

AppendFile::AppendFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError("[io] cannot open " + path.string() + " for appending: " + std::strerror(errno));
}

AppendFile::~AppendFile() { ::close(fd_); }

void AppendFile::append(std::string_view bytes) {
  // One writer per run folder (io/dir_lock.h), so the length before the write is where this line begins.
  struct stat before {};
  if (::fstat(fd_, &before) != 0)
    throw IoError("[io] cannot append to " + path_.string() + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      // Shrinking needs no space; if even that fails, readers still skip a torn last line.
      if (::ftruncate(fd_, before.st_size) != 0) static_cast<void>(0);
      throw IoError("[io] cannot append to " + path_.string() + ": " + std::strerror(error));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace causal
