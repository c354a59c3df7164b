// Readers beside a live run: when pruning removes the newest checkpoint while a reader loads it, the reader
// loads the newest again, once; a second loss is a clear CheckpointError; other errors pass through.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_retry.h"
#include "core/errors.h"
#include "support/scratch_dir.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

void save_step(const fs::path& run, int64_t step) {
  commit_checkpoint(run / "checkpoints", step, [&](const fs::path& dir) {
    std::ofstream(dir / "model.bin") << "weights at step " << step;
  });
}

}  // namespace

CATCH_TEST_CASE("checkpoint retry: a pruned newest checkpoint is read again from the new newest",
                "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_retry");
  const fs::path run = scratch.path;
  save_step(run, 2);
  save_step(run, 4);
  std::vector<std::string> read;
  read_newest_checkpoint(run, "", [&](const fs::path& dir) {
    read.push_back(dir.filename().string());
    if (read.size() == 1) {
      // The writer saves step 6 and prunes step 4 while the reader is inside it.
      save_step(run, 6);
      fs::remove_all(dir);
      throw CheckpointError("[safetensors] " + (dir / "model.bin").string() + ": cannot open");
    }
  });
  CATCH_CHECK(read == std::vector<std::string>{"step_00000004", "step_00000006"});
}

CATCH_TEST_CASE("checkpoint retry: only once, only for the newest, only when the checkpoint vanished",
                "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_retry_once");
  const fs::path run = scratch.path;
  save_step(run, 2);
  save_step(run, 4);
  int64_t next = 6;
  int calls = 0;
  auto prune_under_reader = [&](const fs::path& dir) {
    ++calls;
    save_step(run, next);
    next += 2;
    fs::remove_all(dir);
    throw CheckpointError("[checkpoint] " + dir.string() + ": cannot open");
  };
  try {
    read_newest_checkpoint(run, "", prune_under_reader);
    CATCH_FAIL("no error after two losses");
  } catch (const CheckpointError& e) {
    CATCH_CHECK(std::string(e.what()).find("was removed while it was read") != std::string::npos);
  }
  CATCH_CHECK(calls == 2);

  // A damaged checkpoint (its files still there) is not retried: its error is the answer.
  calls = 0;
  try {
    read_newest_checkpoint(run, "", [&](const fs::path&) {
      ++calls;
      throw CheckpointError("corrupted");
    });
  } catch (const CheckpointError& e) {
    CATCH_CHECK(std::string(e.what()) == "corrupted");
  }
  CATCH_CHECK(calls == 1);

  // A checkpoint named by step is that one: its removal is reported as it is.
  calls = 0;
  const std::string step = std::to_string(next - 2);
  try {
    read_newest_checkpoint(run, step, prune_under_reader);
  } catch (const CheckpointError& e) {
    CATCH_CHECK(std::string(e.what()).find("was removed while it was read") == std::string::npos);
  }
  CATCH_CHECK(calls == 1);
}
