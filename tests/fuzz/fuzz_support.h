// Shared by the libFuzzer harnesses: the inputs' scratch files and the one rule every harness checks.
//
// The rule: a parser given any bytes returns, or throws a causal::Error (a typed, one-line error with its
// exit code). Anything else escaping a harness (std::out_of_range, nlohmann::json's exceptions,
// std::bad_alloc from a size taken on trust) is a finding, as are ASan and UBSan reports.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/errors.h"

namespace causal::fuzz {

// A folder of this process's own under $TMPDIR (or /tmp), created once, for parsers that read files.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
                              ("causal-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return dir;
}

// Writes `size` bytes to scratch_dir()/name (replacing it) and returns its path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "[fuzz] cannot write %s\n", path.c_str());
    std::abort();
  }
  return path.string();
}

// The typed error a parser threw, which is the expected outcome for most inputs; printed when
// CAUSAL_FUZZ_VERBOSE is set, to see why a seed is refused (tools/fuzz --replay with it set).
inline void expected(const Error& e) {
  static const bool verbose = std::getenv("CAUSAL_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "[fuzz] refused: %s\n", e.what());
}

// A property of a parser's output that must hold; a failure is a finding like a crash.
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "[fuzz] property failed: %s\n", what);
    std::abort();
  }
}

}  // namespace causal::fuzz
