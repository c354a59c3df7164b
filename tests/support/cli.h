// Test helper: runs the `causal` binary as a user would and captures what it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace causal::testing {
namespace fs = std::filesystem;

struct Result {
  int code = -1;   // the exit status; -1 when a signal ended the process
  int signal = 0;  // the signal that ended the process; 0 when it exited
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the shell command line `command` in `dir`, capturing both streams and how it ended. The shell
// execs the command in its own place: otherwise the status would be the shell's, which exits 128 + N when
// its child dies of signal N, and a crash would read as an ordinary exit code.
inline Result run_command(const std::string& dir, const std::string& command) {
  const fs::path tmp = fs::temp_directory_path() / ("causal_cli_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string cmd =
      "cd " + dir + " && exec " + command + " >" + (tmp / "out").string() + " 2>" + (tmp / "err").string();
  const int status = std::system(cmd.c_str());
  Result r;
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  return r;
}

// Runs `causal ARGS` from the source root, as run_command.
inline Result run_causal(const std::string& args) {
  return run_command(CAUSAL_SOURCE_DIR, std::string(CAUSAL_BINARY) + " " + args);
}

inline fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("causal_cli_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

inline int line_count(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace causal::testing
