// Checkpoint directories: complete or absent, verified by their manifest; the newest valid one is used.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint_dir.h"
#include "core/errors.h"
#include "support/scratch_dir.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

fs::path commit(const fs::path& root, int64_t step) {
  return commit_checkpoint(root, step, [&](const fs::path& dir) {
    std::ofstream(dir / "model.bin") << "weights at step " << step;
    std::ofstream(dir / "state.json") << "{\"step\": " << step << "}";
  });
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  in >> s;
  return s;
}

}  // namespace

CATCH_TEST_CASE("commit_checkpoint writes files, a manifest and LATEST", "[unit][checkpoint]") {
  testing::ScratchDir root("checkpoint_dir");
  const fs::path dir = commit(root.path, 7);
  CATCH_CHECK(dir.filename() == "step_00000007");
  CATCH_CHECK(read(root.path / "LATEST") == "step_00000007");
  const nlohmann::json manifest = verify_checkpoint(dir);
  CATCH_CHECK(manifest["step"] == 7);
  CATCH_CHECK(manifest["files"].size() == 2);
  CATCH_CHECK(manifest["files"]["model.bin"]["bytes"] == fs::file_size(dir / "model.bin"));
  CATCH_CHECK_THROWS_AS(commit(root.path, 7), CheckpointError);  // never overwritten
}

// A flipped byte, a missing file or a missing manifest makes a checkpoint invalid; the newest valid
// one is used instead.
CATCH_TEST_CASE("damaged checkpoints are never loaded", "[unit][checkpoint]") {
  testing::ScratchDir root("checkpoint_dir");
  const fs::path first = commit(root.path, 1);
  const fs::path second = commit(root.path, 2);
  CATCH_REQUIRE(latest_valid_checkpoint(root.path) == second);
  {
    std::fstream f(second / "model.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('W');  // same size, different content: only the hash can tell
  }
  CATCH_CHECK_THROWS_WITH(verify_checkpoint(second), Catch::Matchers::Contains("sha256"));
  CATCH_CHECK(latest_valid_checkpoint(root.path) == first);
  fs::remove(first / "state.json");
  CATCH_CHECK_THROWS_WITH(verify_checkpoint(first), Catch::Matchers::Contains("missing"));
  CATCH_CHECK_FALSE(latest_valid_checkpoint(root.path).has_value());
  fs::create_directories(root.path / "step_00000009");  // no manifest: incomplete
  CATCH_CHECK_THROWS_WITH(verify_checkpoint(root.path / "step_00000009"),
                          Catch::Matchers::Contains("manifest"));
  CATCH_CHECK_FALSE(latest_valid_checkpoint(root.path).has_value());
}

// A failure while writing leaves no directory behind and LATEST on the previous checkpoint.
CATCH_TEST_CASE("a failed commit leaves the previous checkpoint as LATEST", "[unit][checkpoint]") {
  testing::ScratchDir root("checkpoint_dir");
  commit(root.path, 3);
  CATCH_CHECK_THROWS_AS(
      commit_checkpoint(root.path, 4, [](const fs::path&) { throw std::runtime_error("disk full"); }),
      CheckpointError);
  CATCH_CHECK_FALSE(fs::exists(root.path / "step_00000004"));
  CATCH_CHECK_FALSE(fs::exists(root.path / ".tmp-step_00000004"));
  CATCH_CHECK(read(root.path / "LATEST") == "step_00000003");
}

CATCH_TEST_CASE("stale temporaries are removed and pruning keeps the newest", "[unit][checkpoint]") {
  testing::ScratchDir root("checkpoint_dir");
  for (int64_t s : {10, 20, 30, 40}) commit(root.path, s);
  fs::create_directories(root.path / ".tmp-step_00000050");
  remove_stale_temporaries(root.path);
  CATCH_CHECK_FALSE(fs::exists(root.path / ".tmp-step_00000050"));
  prune_checkpoints(root.path, 2);
  CATCH_CHECK_FALSE(fs::exists(root.path / "step_00000010"));
  CATCH_CHECK_FALSE(fs::exists(root.path / "step_00000020"));
  CATCH_CHECK(fs::exists(root.path / "step_00000030"));
  CATCH_CHECK(fs::exists(root.path / "step_00000040"));
  // If the newest directories are damaged, the newest complete one survives pruning.
  fs::remove(root.path / "step_00000040" / "manifest.json");
  fs::remove(root.path / "step_00000030" / "manifest.json");
  commit(root.path, 5);  // older step, but the only complete one
  prune_checkpoints(root.path, 1);
  CATCH_CHECK(fs::exists(root.path / "step_00000005"));
}

// A crash between a checkpoint's rename and the replacement of LATEST leaves LATEST one behind; the newer
// directory is complete and must win, or the continued run would collide with it at its next save.
CATCH_TEST_CASE("the newest valid checkpoint wins over a LATEST left behind", "[unit][checkpoint]") {
  testing::ScratchDir root("checkpoint_dir");
  commit(root.path, 1);
  const fs::path second = commit(root.path, 2);
  std::ofstream(root.path / "LATEST") << "step_00000001\n";
  CATCH_CHECK(latest_valid_checkpoint(root.path) == second);
}

// --resume auto past a damaged newest checkpoint: those directories are renamed aside, byte for byte,
// so the run can write their steps again; valid ones and older ones stay.
CATCH_TEST_CASE("invalid checkpoints newer than the one resumed are set aside", "[unit][checkpoint]") {
  testing::ScratchDir root("checkpoint_dir");
  const fs::path first = commit(root.path, 1);
  const fs::path second = commit(root.path, 2);
  const fs::path third = commit(root.path, 3);
  fs::resize_file(third / "model.bin", 0);
  CATCH_CHECK(newest_checkpoint_problem(root.path).find("model.bin has 0 bytes") != std::string::npos);
  const std::vector<std::string> set_aside = set_aside_invalid_after(root.path, second);
  CATCH_REQUIRE(set_aside.size() == 1);
  CATCH_CHECK(set_aside[0].rfind("step_00000003 (model.bin has 0 bytes", 0) == 0);
  CATCH_CHECK_FALSE(fs::exists(third));
  CATCH_CHECK(fs::exists(root.path / "invalid-step_00000003" / "model.bin"));
  CATCH_CHECK(fs::exists(first));
  CATCH_CHECK(fs::exists(second));
  CATCH_CHECK(newest_checkpoint_problem(root.path).empty());
  CATCH_CHECK(set_aside_invalid_after(root.path, second).empty());
}

// A manifest vouches only for files inside its own directory: a listed "../x" whose size and hash match a
// file outside once made the checkpoint verify (found by review, reproduced by tests/fuzz/fuzz_checkpoint:
// corpus/checkpoint/crash-manifest-names-a-file-outside).
CATCH_TEST_CASE("a manifest naming a file outside its checkpoint is refused", "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_outside");
  const fs::path dir = commit(scratch.path, 4);
  std::ofstream(scratch.path / "outside.txt") << "hello";
  for (const std::string& name : {std::string("../outside.txt"), scratch.path.string() + "/outside.txt"}) {
    // sha256("hello"): the listed file matches, only its place is wrong.
    std::ofstream(dir / "manifest.json")
        << R"({"step": 4, "files": {")" << name
        << R"(": {"bytes": 5, "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}}})";
    try {
      verify_checkpoint(dir);
      CATCH_FAIL("verified a manifest listing " + name);
    } catch (const CheckpointError& e) {
      CATCH_CHECK(std::string(e.what()).find("not a file name inside") != std::string::npos);
    }
  }
  CATCH_CHECK(!latest_valid_checkpoint(scratch.path));
}

// tests/fuzz/fuzz_checkpoint (UBSan): a byte count written as a float (2.2e82) was cast to uint64 by
// nlohmann's get<>(), undefined behaviour (corpus/checkpoint/crash-manifest-bytes-float-out-of-range).
CATCH_TEST_CASE("a manifest whose byte count is not a whole number is refused", "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_bytes");
  const fs::path dir = commit(scratch.path, 4);
  for (const std::string& bytes : {std::string("2.2e82"), std::string("-5"), std::string("5.0")}) {
    std::ofstream(dir / "manifest.json")
        << R"({"step": 4, "files": {"state.json": {"bytes": )" << bytes << R"(, "sha256": "00"}}})";
    try {
      verify_checkpoint(dir);
      CATCH_FAIL("verified a manifest with bytes " + bytes);
    } catch (const CheckpointError& e) {
      CATCH_CHECK(std::string(e.what()).find("not a byte count") != std::string::npos);
    }
  }
}

// tests/fuzz/fuzz_checkpoint: a listed name longer than the file system allows made is_regular_file throw
// std::filesystem::error out of the reader (corpus/checkpoint/crash-manifest-name-too-long).
CATCH_TEST_CASE("a manifest listing a name too long for the file system is refused", "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_long_name");
  const fs::path dir = commit(scratch.path, 4);
  std::ofstream(dir / "manifest.json")
      << R"({"step": 4, "files": {")" << std::string(5000, 'B') << R"(": {"bytes": 5, "sha256": "00"}}})";
  CATCH_CHECK_THROWS_WITH(verify_checkpoint(dir), Catch::Matchers::Contains("is listed but missing"));
  CATCH_CHECK(!latest_valid_checkpoint(scratch.path));
}
