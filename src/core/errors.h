// Every error the library reports to a user: one line of text and the process exit code it maps to.
// The CLI catches `Error` once and exits with exit_code(); anything else is an unexpected failure (1).
#pragma once

#include <stdexcept>
#include <string>

namespace causal {

// Documented in docs/errors.md and `causal --help`.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,     // unexpected: an I/O failure outside the files below, or a bug
  kExitConfig = 2,      // the config, a flag, or the run folder it names
  kExitData = 3,        // a data file: missing, unreadable, corrupt, or not matching the model
  kExitCheckpoint = 4,  // a checkpoint or forensics bundle: missing, damaged, or not matching the config
  kExitNumerical = 5,   // a non-finite loss or gradient ended the run
  kExitDist = 6,        // data-parallel ranks could not meet, or one of them died or timed out
};

// How the CLI prints an Error on stderr, as the last line: parents (the --nproc launcher, the sweep) find
// their children's reason by it.
inline constexpr const char* kErrorPrefix = "causal: error: ";

// what() is always one line (newlines become spaces): the CLI and logs print it as a single line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  virtual int exit_code() const = 0;
};

// A flag or a combination of flags that cannot be honoured.
class UsageError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitConfig; }
};

// A bad config file, key, value or override. what() is one line: "<source>: <json.path>: <problem>".
class ConfigError : public Error {
 public:
  ConfigError(const std::string& source, const std::string& path, const std::string& problem);
  int exit_code() const override { return kExitConfig; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string source_;
  std::string path_;
  std::string problem_;
};

// The run folder cannot be used (taken by another process, not writable, holds another run).
class RunFolderError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitConfig; }
};

// A data file or generated data set that cannot be used.
class DataError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitData; }
};

// A checkpoint (or forensics bundle) that cannot be written, read or trusted.
class CheckpointError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitCheckpoint; }
};

// A non-finite loss or gradient stopped the run before any update was applied.
class NonFiniteError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitNumerical; }
};

// Data-parallel training: a rank never joined, died, or a collective timed out (docs/distributed.md).
class DistributedError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitDist; }
};

// A file operation failed (open, write, fsync, rename). Layers that own a kind of file rethrow it as
// their own error (CheckpointError, DataError, RunFolderError) so the exit code says which file kind.
class IoError : public Error {
 public:
  using Error::Error;
  int exit_code() const override { return kExitFailure; }
};

// Thrown after the checkpoint of an interrupted run was written; the exit code is 128 + signal number.
class InterruptedRun : public Error {
 public:
  InterruptedRun(const std::string& message, int exit_code) : Error(message), exit_code_(exit_code) {}
  int exit_code() const override { return exit_code_; }

 private:
  int exit_code_;
};

}  // namespace causal
