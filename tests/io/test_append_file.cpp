// Appends that fail part way (a full disk, a file size limit) leave the file as it was before the call:
// metrics.jsonl never ends in half a row.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "io/append_file.h"
#include "io/complete_lines.h"
#include "support/scratch_dir.h"

using namespace causal;

namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

CATCH_TEST_CASE("append file: a write cut short is undone and named with its errno text", "[unit][io]") {
  testing::ScratchDir dir("append_file");
  const auto file = dir.path / "metrics.jsonl";
  const std::string row(60, 'x');
  // RLIMIT_FSIZE of 100 bytes: the second 61-byte row is written in part (39 bytes), then EFBIG, as a
  // disk filling mid-write does with ENOSPC. In a child, since the limit holds for the whole process.
  const pid_t child = ::fork();
  CATCH_REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{100, 100};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    AppendFile out(file);
    out.append(row + "\n");
    try {
      out.append(row + "\n");
    } catch (const IoError& e) {
      const std::string what = e.what();
      const bool named = what.find(file.string()) != std::string::npos &&
                         what.find(std::strerror(EFBIG)) != std::string::npos;
      ::_exit(named ? 0 : 2);
    }
    ::_exit(3);  // no error: the limit did not bite
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CATCH_REQUIRE(WIFEXITED(status));
  CATCH_CHECK(WEXITSTATUS(status) == 0);
  CATCH_CHECK(read_all(file) == row + "\n");  // the partial second row was cut back
}

CATCH_TEST_CASE("append file: /dev/full's ENOSPC is an IoError naming the file", "[unit][io]") {
  AppendFile out("/dev/full");
  try {
    out.append("{\"step\": 1}\n");
    CATCH_FAIL("no error from /dev/full");
  } catch (const IoError& e) {
    CATCH_CHECK(std::string(e.what()) ==
                std::string("[io] cannot append to /dev/full: ") + std::strerror(ENOSPC));
  }
}

CATCH_TEST_CASE("complete lines: a trailing line without its newline is not read", "[unit][io]") {
  testing::ScratchDir dir("complete_lines");
  const auto file = dir.path / "metrics.jsonl";
  std::ofstream(file, std::ios::binary) << "{\"step\":1}\n\n{\"step\":2}\n{\"step\":3,\"lo";
  bool partial = false;
  const std::vector<std::string> lines = read_complete_lines(file, &partial);
  CATCH_CHECK(partial);
  CATCH_REQUIRE(lines.size() == 3);
  CATCH_CHECK(lines[0] == "{\"step\":1}");
  CATCH_CHECK(lines[1].empty());
  CATCH_CHECK(lines[2] == "{\"step\":2}");
  CATCH_CHECK(read_complete_lines(dir.path / "absent", &partial).empty());
  CATCH_CHECK(!partial);
}
