// Test helper: an empty directory under the system temp folder, removed again when the test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace causal::testing {

struct ScratchDir {
  std::filesystem::path path;
  // `name` keeps concurrent tests (ctest -j) apart; the pid keeps concurrent test binaries apart.
  explicit ScratchDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("causal_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace causal::testing
