// One writer per run folder through the command line: a second `train` on a folder a live run holds is
// refused at once (exit 2, one line naming the holder's pid); once the holder is killed with SIGKILL, the
// kernel has dropped its lock and `--resume auto` takes the folder.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "checkpoint/checkpoint_dir.h"
#include "support/cli.h"

extern char** environ;

using namespace causal::testing;
namespace fs = std::filesystem;

namespace {

const std::string kLockTestFlags =
    "train --config configs/retrieval.json --set train.batch_size=8 --set data.train_examples=256 "
    "--set data.test_examples=64 --set train.log_every=1 --set train.checkpoint_every=4 ";

}  // namespace

CATCH_TEST_CASE("a second writer of a run folder is refused naming the holder, and kill -9 frees it",
                "[e2e][cli]") {
  const fs::path dir = scratch("folder_lock");
  // The holder: a long run, in its loop once metrics.jsonl has rows.
  const std::string cmd = std::string("cd ") + CAUSAL_SOURCE_DIR + " && exec " + CAUSAL_BINARY + " " +
                          kLockTestFlags + "--set train.steps=1000000 --run-dir " + dir.string() +
                          " >/dev/null 2>" + (dir.string() + ".err");
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t holder = 0;
  CATCH_REQUIRE(posix_spawn(&holder, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
  bool running = false;
  for (int i = 0; i < 3000 && !running; ++i) {
    running = line_count(slurp(dir / "metrics.jsonl")) >= 5;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CATCH_REQUIRE(running);

  const auto started = std::chrono::steady_clock::now();
  const Result second =
      run_causal(kLockTestFlags + "--set train.steps=1000000 --resume auto --run-dir " + dir.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CATCH_CHECK(second.code == 2);
  CATCH_CHECK(line_count(second.err) == 1);
  CATCH_CHECK(second.err == "causal: error: run folder " + dir.string() +
                                " is locked by another causal process (pid " + std::to_string(holder) + ", " +
                                (dir / ".lock").string() + "); wait for it to end or stop it\n");
  CATCH_CHECK(seconds < 30);  // refused at once, not after waiting for the holder
  // A new run asked into the same folder is told the same, not only that the folder is taken.
  const Result fresh = run_causal(kLockTestFlags + "--set train.steps=8 --run-dir " + dir.string());
  CATCH_CHECK(fresh.code == 2);
  CATCH_CHECK(fresh.err == second.err);

  ::kill(holder, SIGKILL);
  int status = 0;
  ::waitpid(holder, &status, 0);
  CATCH_REQUIRE(WIFSIGNALED(status));
  // The restart takes the folder at once and finishes (from its newest checkpoint, or step 0).
  const auto newest = causal::latest_valid_checkpoint(dir / "checkpoints");
  const int64_t from = newest ? std::stoll(newest->filename().string().substr(5)) : 0;
  const Result restart = run_causal(kLockTestFlags + "--set train.steps=" + std::to_string(from + 2) +
                                    " --resume auto --run-dir " + dir.string());
  CATCH_CHECK(restart.code == 0);
  CATCH_CHECK(restart.err.find("is locked") == std::string::npos);
  fs::remove_all(dir);
  fs::remove(dir.string() + ".err");
}
