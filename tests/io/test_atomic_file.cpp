// Whole-or-absent writes: the target holds the old bytes or the new ones, and no temporary is left behind.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/sha256.h"
#include "support/scratch_dir.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int entries(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

CATCH_TEST_CASE("write_file_atomically replaces the file and leaves no temporary", "[unit][io]") {
  testing::ScratchDir dir("atomic_replace");
  const fs::path file = dir.path / "results.json";
  write_file_atomically(file, "first\n");
  write_file_atomically(file, std::string("second\n"));
  CATCH_CHECK(slurp(file) == "second\n");
  CATCH_CHECK(entries(dir.path) == 1);
}

// Invariant: a writer that fails part way leaves the previous file exactly as it was.
CATCH_TEST_CASE("a failed atomic write keeps the old file and removes its temporary", "[unit][io]") {
  testing::ScratchDir dir("atomic_failed");
  const fs::path file = dir.path / "metrics.jsonl";
  write_file_atomically(file, "kept\n");
  CATCH_CHECK_THROWS_AS(write_file_atomically(file,
                                              [](std::ostream& out) {
                                                out << "half of a new file";
                                                throw std::runtime_error("writer failed");
                                              }),
                        std::runtime_error);
  CATCH_CHECK(slurp(file) == "kept\n");
  CATCH_CHECK(entries(dir.path) == 1);
  // A target that cannot be replaced (a directory of that name) is an IoError, temporary removed.
  fs::create_directories(dir.path / "taken" / "x");
  CATCH_CHECK_THROWS_AS(write_file_atomically(dir.path / "taken", "x"), IoError);
  CATCH_CHECK(entries(dir.path) == 2);
}

// Every library error carries an exit code: an unreadable file is an IoError, never a bare runtime_error.
CATCH_TEST_CASE("io errors are causal errors with an exit code", "[unit][io]") {
  testing::ScratchDir dir("io_errors");
  CATCH_CHECK_THROWS_AS(sha256_file((dir.path / "missing").string()), IoError);
  try {
    sha256_file((dir.path / "missing").string());
  } catch (const Error& e) {
    CATCH_CHECK(e.exit_code() == kExitFailure);
    CATCH_CHECK_THAT(e.what(), Catch::Matchers::Contains("missing"));
  }
  CATCH_CHECK_THROWS_AS(io_as<CheckpointError>([&] { return sha256_file((dir.path / "missing").string()); }),
                        CheckpointError);
}
