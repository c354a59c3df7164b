// Test helpers for the catalogue of bad inputs (docs/errors.md#catalogue-of-bad-inputs): the contract
// every case checks, tree hashes to show that a run folder did not change, and one tiny finished run
// shared by the cases that attack a checkpoint.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "io/sha256.h"
#include "support/cli.h"

namespace causal::testing {

// The contract of every case: `code`, one line, the prefix, each of `names` in it, no signal, and none of
// the text an uncaught exception or a LibTorch stack trace prints.
// `started` = the command trained before it failed: its progress lines come first, the error line last.
inline Result check_refused(const std::string& args, int code, const std::vector<std::string>& names,
                            bool started = false) {
  const Result r = run_causal(args);
  CATCH_INFO("causal " << args << "\n-> exit " << r.code << ", signal " << r.signal << ", stderr: " << r.err);
  CATCH_CHECK(r.signal == 0);  // exited, not killed (run_command tells the two apart: test_harness.cpp)
  CATCH_CHECK(r.code == code);
  if (!started) CATCH_CHECK(line_count(r.err) == 1);
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  CATCH_CHECK(last.rfind("causal: error: ", 0) == 0);
  CATCH_CHECK(r.err.find("causal: error: ") == r.err.size() - last.size());  // one error line, the last
  for (const char* crash : {"terminate called", "what():", "frame #", "Exception raised from"})
    CATCH_CHECK_THAT(r.err, !Catch::Matchers::Contains(crash));
  for (const std::string& name : names) CATCH_CHECK_THAT(last, Catch::Matchers::Contains(name));
  return r;
}

// SHA-256 of every file under `dir`, by relative path: "unchanged" means equal maps. `.lock` is left out:
// a command that takes the lock writes its pid there (run/run_folder.cpp), which is no run data.
inline std::map<std::string, std::string> hash_tree(const std::filesystem::path& dir) {
  std::map<std::string, std::string> hashes;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().filename() != ".lock")
      hashes[std::filesystem::relative(entry.path(), dir).string()] =
          causal::sha256_file(entry.path().string());
  }
  return hashes;
}

// A scratch folder holding `name` with `text`; returns the file's path.
inline std::filesystem::path write_file(const std::filesystem::path& dir, const std::string& name,
                                        const std::string& text) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << text;
  return dir / name;
}

// Flips one bit of the byte at `offset` (negative: from the end) of `file`.
inline void flip_byte(const std::filesystem::path& file, long offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset, offset < 0 ? std::ios::end : std::ios::beg);
  const auto at = f.tellg();
  const char c = static_cast<char>(f.get());
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x01));
}

// The training command of the shared run, with `extra` flags (a later --set wins).
inline std::string retrieval_run_args(const std::string& extra) {
  return "train --config configs/retrieval.json --set train.steps=4 --set train.checkpoint_every=2 "
         "--set train.batch_size=8 --set data.train_examples=256 --set data.test_examples=64 " +
         extra;
}

// A finished 4-step retrieval run with checkpoints step_00000002 and step_00000004, made once per build
// of `causal` and shared by every test process (ctest runs each case in its own): trained into a
// temporary and renamed into place. Cases copy it (copy_of_shared_run) before attacking it.
inline std::filesystem::path shared_run() {
  namespace fs = std::filesystem;
  const auto stamp = fs::last_write_time(CAUSAL_BINARY).time_since_epoch().count();
  const fs::path dir = fs::temp_directory_path() / ("causal_shared_run_" + std::to_string(stamp));
  if (fs::exists(dir / "results.json")) return dir;
  const fs::path temp = dir.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(temp);
  const Result r = run_causal(retrieval_run_args("--run-dir " + temp.string()));
  CATCH_REQUIRE(r.code == 0);
  std::error_code ec;
  fs::rename(temp, dir, ec);  // fails when another process got there first: theirs is as good
  fs::remove_all(temp, ec);
  CATCH_REQUIRE(fs::exists(dir / "checkpoints" / "step_00000002" / "manifest.json"));
  return dir;
}

// A private copy of the shared run at `dest` (replaced if present).
inline std::filesystem::path copy_of_shared_run(const std::filesystem::path& dest) {
  namespace fs = std::filesystem;
  fs::remove_all(dest);
  fs::create_directories(dest.parent_path());
  fs::copy(shared_run(), dest, fs::copy_options::recursive);
  fs::remove(dest / ".lock");
  return dest;
}

}  // namespace causal::testing
