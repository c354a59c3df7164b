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
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `causal ARGS` from the source root, capturing both streams and the exit code.
inline Result run_causal(const std::string& args) {
  const fs::path tmp = fs::temp_directory_path() / ("causal_cli_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string cmd = std::string("cd ") + CAUSAL_SOURCE_DIR + " && " + CAUSAL_BINARY + " " + args +
                          " >" + (tmp / "out").string() + " 2>" + (tmp / "err").string();
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  return r;
}

inline fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("causal_cli_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

inline int line_count(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace causal::testing
