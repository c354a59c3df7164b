// Damaged checkpoint and forensics files are CheckpointErrors (exit code 4), never a parse exception of
// the standard library (which would exit 1 or 2).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/forensics_bundle.h"
#include "core/errors.h"
#include "io/safetensors.h"
#include "support/scratch_dir.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

const nlohmann::json kState = {{"step", 3}, {"lr", 0.1},   {"message", "m"},       {"micro_batches", 1},
                               {"rng", {}}, {"fault", ""}, {"last_checkpoint", ""}};

// A forensics bundle with a valid manifest whose batch tensor is named `tensor` and whose state is `state`.
fs::path bundle(const fs::path& root, const std::string& tensor, const nlohmann::json& state) {
  return commit_checkpoint(root, 3, [&](const fs::path& dir) {
    save_safetensors((dir / "batch.safetensors").string(), {{tensor, at::zeros({1, 2}, at::kLong)}});
    std::ofstream(dir / "state.json") << state.dump();
    std::ofstream(dir / "config.json") << "{}";
  });
}

}  // namespace

CATCH_TEST_CASE("a checkpoint step too large for any run is a CheckpointError", "[unit][checkpoint]") {
  testing::ScratchDir run("huge_step");
  fs::create_directories(run.path / "checkpoints");
  CATCH_CHECK_THROWS_AS(find_checkpoint(run.path, "99999999999999999999999"), CheckpointError);
  CATCH_CHECK_THROWS_AS(find_checkpoint(run.path, "12"), CheckpointError);
}

CATCH_TEST_CASE("a forensics bundle with a malformed tensor name or state is a CheckpointError",
                "[unit][checkpoint]") {
  testing::ScratchDir root("bad_bundle");
  CATCH_CHECK(
      read_forensics(bundle(root.path / "good", "mb0.tokens", kState)).micro_batches.at(0).tokens.defined());
  for (const char* name :
       {"mbx.tokens", "mb.tokens", "mb99999999999999999999.tokens", "mb0.nothing", "tokens"}) {
    CATCH_INFO(name);
    const fs::path dir = bundle(root.path / name, name, kState);
    CATCH_CHECK_THROWS_AS(read_forensics(dir), CheckpointError);
  }
  nlohmann::json missing_field = kState;
  missing_field.erase("lr");
  CATCH_CHECK_THROWS_AS(read_forensics(bundle(root.path / "state", "mb0.tokens", missing_field)),
                        CheckpointError);
}
