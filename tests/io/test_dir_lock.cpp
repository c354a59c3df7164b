// One writer per folder: a second lock is refused with the holder's pid, and a holder killed with SIGKILL
// leaves the folder free (the kernel drops its flock), so a crashed run never blocks its restart.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <string>

#include "io/dir_lock.h"
#include "support/scratch_dir.h"

using namespace causal;

CATCH_TEST_CASE("dir lock: a second lock is refused naming the holder's pid, then free once released",
                "[unit][io]") {
  testing::ScratchDir dir("dir_lock");
  const auto file = dir.path / ".lock";
  std::string holder;
  auto first = DirLock::try_lock(file, &holder);
  CATCH_REQUIRE(first != nullptr);
  // flock conflicts between open file descriptions, so one process stands in for two.
  CATCH_CHECK(DirLock::try_lock(file, &holder) == nullptr);
  CATCH_CHECK(holder == std::to_string(::getpid()));
  // The probe a new run makes before refusing a taken folder: neither takes the lock nor writes.
  CATCH_CHECK(DirLock::held_by(file) == std::optional<std::string>(std::to_string(::getpid())));
  first.reset();
  CATCH_CHECK(!DirLock::held_by(file));
  CATCH_CHECK(!DirLock::held_by(dir.path / "absent.lock"));
  CATCH_CHECK(!std::filesystem::exists(dir.path / "absent.lock"));
  CATCH_CHECK(DirLock::try_lock(file, &holder) != nullptr);
}

CATCH_TEST_CASE("dir lock: a holder killed with SIGKILL releases the lock", "[unit][io]") {
  testing::ScratchDir dir("dir_lock_kill");
  const auto file = dir.path / ".lock";
  int ready[2];
  CATCH_REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  CATCH_REQUIRE(child >= 0);
  if (child == 0) {
    // The child takes the lock, says so, and waits to be killed: no destructor will run.
    std::string unused;
    auto lock = DirLock::try_lock(file, &unused);
    const char byte = lock ? '1' : '0';
    [[maybe_unused]] const ssize_t n = ::write(ready[1], &byte, 1);
    ::pause();
    ::_exit(0);
  }
  char byte = 0;
  CATCH_REQUIRE(::read(ready[0], &byte, 1) == 1);
  CATCH_REQUIRE(byte == '1');
  std::string holder;
  CATCH_CHECK(DirLock::try_lock(file, &holder) == nullptr);  // guards against a lock that never holds
  CATCH_CHECK(holder == std::to_string(child));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CATCH_CHECK(WIFSIGNALED(status));
  CATCH_CHECK(DirLock::try_lock(file, &holder) != nullptr);
  ::close(ready[0]);
  ::close(ready[1]);
}
