// Files that are either whole or absent: every writer in causal goes through these, so a crash or a full
// disk leaves the previous file (or nothing), never half a file.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string_view>

#include "core/errors.h"

namespace causal {

using FileWriter = std::function<void(std::ostream& out)>;

// Flushes a file or directory to stable storage. Throws IoError naming it.
void fsync_path(const std::filesystem::path& path);

// Writes `path` in place (truncating) and fsyncs it; for files inside a directory that is itself made
// atomic (checkpoints). Throws IoError naming the file when any byte fails to reach it.
void write_file_synced(const std::filesystem::path& path, std::string_view bytes);
void write_file_synced(const std::filesystem::path& path, const FileWriter& write);

// Writes a temporary sibling (".<name>.tmp-<pid>"), fsyncs it, renames it over `path` and fsyncs the
// directory: readers see the old file or the new one. On failure the temporary is removed and IoError
// names the file.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);
void write_file_atomically(const std::filesystem::path& path, const FileWriter& write);

// Makes the folder `path` whole or not at all: `write` fills a temporary sibling (".<name>.tmp-<pid>"),
// which is then fsynced and renamed to `path`, and the parent fsynced. On any failure the temporary is
// removed and the error rethrown.
void write_folder_atomically(const std::filesystem::path& path,
                             const std::function<void(const std::filesystem::path& temp)>& write);

// Runs `io`, rethrowing an IoError as E, the error of the kind of file the caller owns (exit codes differ
// between checkpoints, data files and run folders).
template <class E, class F>
decltype(auto) io_as(F&& io) {
  try {
    return io();
  } catch (const IoError& e) {
    throw E(e.what());
  }
}

}  // namespace causal
