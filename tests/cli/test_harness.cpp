// The CLI harness itself (support/cli.h): the crash check of every bad-input case (support/bad_input.h)
// relies on run_command telling a death by signal from an exit, which a shell in between would hide.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <string>

#include "support/cli.h"

using causal::testing::Result;
using causal::testing::run_command;

CATCH_TEST_CASE("harness: a process killed by a signal is reported as signalled, not as an exit code",
                "[unit][cli]") {
  const std::string kDir = std::filesystem::temp_directory_path().string();
  for (const int sig : {SIGSEGV, SIGABRT}) {
    CATCH_INFO("signal " << sig);
    // The inner shell kills itself, as a crashing `causal` would die (no core file left behind).
    const Result r = run_command(kDir, "sh -c 'ulimit -c 0; kill -" + std::to_string(sig) + " $$'");
    CATCH_CHECK(r.signal == sig);
    CATCH_CHECK(r.code == -1);
  }
  // An exit code that a shell would report for a crash is still an exit, not a signal.
  const Result exited = run_command(kDir, "sh -c 'exit 139'");
  CATCH_CHECK(exited.signal == 0);
  CATCH_CHECK(exited.code == 139);
  const Result ok = run_command(kDir, "sh -c 'echo out; echo err >&2'");
  CATCH_CHECK(ok.signal == 0);
  CATCH_CHECK(ok.code == 0);
  CATCH_CHECK(ok.out == "out\n");
  CATCH_CHECK(ok.err == "err\n");
}
