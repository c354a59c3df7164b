// The checkpoint and runtime rows of the catalogue of bad inputs (docs/errors.md#catalogue-of-bad-inputs):
// damaged, lying or mismatched checkpoints exit 4 with one line and are never loaded, `--resume auto`
// falls back past an invalid newest checkpoint and says so, and an output directory that cannot take the
// run is refused before training starts. Most cases attack a copy of one shared tiny run.
#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/sha256.h"
#include "support/bad_input.h"
#include "support/byte_docs.h"
#include "support/skip.h"

using namespace causal::testing;
namespace fs = std::filesystem;

namespace {

const std::string kStep2 = "step_00000002", kStep4 = "step_00000004";

fs::path checkpoint(const fs::path& run, const std::string& name) { return run / "checkpoints" / name; }

// Rewrites the manifest of `dir` so that it matches its files again: an edit the manifest cannot catch.
void rehash_manifest(const fs::path& dir) {
  nlohmann::json manifest = nlohmann::json::parse(slurp(dir / "manifest.json"));
  for (auto& [name, entry] : manifest["files"].items()) {
    entry["bytes"] = fs::file_size(dir / name);
    entry["sha256"] = causal::sha256_file((dir / name).string());
  }
  std::ofstream(dir / "manifest.json") << manifest.dump(2) << "\n";
}

// `causal train` continuing the shared run's folder `run` with `extra` flags.
std::string resume_args(const fs::path& run, const std::string& extra) {
  return retrieval_run_args(extra + " --run-dir " + run.string());
}

// A small tmpfs at `dir` (root only; false where mounting is not allowed, e.g. in a container).
bool mount_tmpfs(const fs::path& dir, const std::string& options) {
  fs::create_directories(dir);
  return ::geteuid() == 0 && ::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) == 0;
}

}  // namespace

// --- a damaged newest checkpoint: fallback with auto, an error for an explicit path ------------------

CATCH_TEST_CASE("bad input: truncated or zero-byte newest checkpoint: auto falls back, a path errors",
                "[e2e][cli][checkpoint]") {
  for (const bool zero : {false, true}) {
    CATCH_INFO((zero ? "zero-byte" : "truncated") << " model.safetensors in step_00000004");
    const fs::path run = copy_of_shared_run(scratch("bad_truncated") / "run");
    const fs::path model = checkpoint(run, kStep4) / "model.safetensors";
    fs::resize_file(model, zero ? 0 : fs::file_size(model) / 2);
    const auto before = hash_tree(run);

    check_refused(resume_args(run, "--set train.steps=6 --resume " + checkpoint(run, kStep4).string()), 4,
                  {kStep4, "model.safetensors", "bytes"});
    CATCH_CHECK(hash_tree(run) == before);

    const Result r = run_causal(resume_args(run, "--set train.steps=6"));
    CATCH_INFO(r.err);
    CATCH_CHECK(r.code == 0);
    CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains("falling back to " + checkpoint(run, kStep2).string()));
    CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains(kStep4 + " ("));
    // The older checkpoint was not touched; the invalid one is kept aside, byte for byte.
    const auto after = hash_tree(run);
    for (const auto& [file, hash] : before) {
      if (file.rfind("checkpoints/" + kStep2, 0) == 0) CATCH_CHECK(after.at(file) == hash);
      if (file.rfind("checkpoints/" + kStep4, 0) == 0)
        CATCH_CHECK(after.at("checkpoints/invalid-" + file.substr(12)) == hash);
    }
    CATCH_CHECK(fs::exists(checkpoint(run, "step_00000006") / "manifest.json"));
    fs::remove_all(run.parent_path());
  }
}

CATCH_TEST_CASE("bad input: every checkpoint invalid: auto exits 4 and changes nothing",
                "[e2e][cli][checkpoint]") {
  const fs::path run = copy_of_shared_run(scratch("bad_all_invalid") / "run");
  for (const std::string& step : {kStep2, kStep4})
    fs::resize_file(checkpoint(run, step) / "model.safetensors", 0);
  const auto before = hash_tree(run);
  check_refused(resume_args(run, "--set train.steps=6"), 4,
                {"no valid checkpoint in " + (run / "checkpoints").string(), "model.safetensors"});
  CATCH_CHECK(hash_tree(run) == before);
  fs::remove_all(run.parent_path());
}

// --- damage the manifest detects --------------------------------------------------------------------

CATCH_TEST_CASE("bad input: a flipped byte in any file of a checkpoint", "[e2e][cli][checkpoint]") {
  // manifest.json: a byte inside the first sha256 it lists, so the file it describes no longer matches.
  for (const std::string file :
       {"model.safetensors", "optimizer.safetensors", "state.json", "config.json", "manifest.json"}) {
    CATCH_INFO("flipped byte in " << file);
    const fs::path run = copy_of_shared_run(scratch("bad_flipped") / "run");
    const fs::path dir = checkpoint(run, kStep4);
    const std::string manifest = slurp(dir / "manifest.json");
    flip_byte(dir / file, file == "manifest.json" ? static_cast<long>(manifest.find("\"sha256\": \"") + 20)
                                                  : static_cast<long>(fs::file_size(dir / file) / 2));
    const auto before = hash_tree(run);
    check_refused("eval --run " + run.string() + " --checkpoint " + dir.string(), 4, {kStep4, "sha256"});
    check_refused(resume_args(run, "--set train.steps=6 --resume " + dir.string()), 4, {kStep4, "sha256"});
    CATCH_CHECK(hash_tree(run) == before);
    fs::remove_all(run.parent_path());
  }
}

CATCH_TEST_CASE("bad input: a file of a checkpoint missing", "[e2e][cli][checkpoint]") {
  const fs::path run = copy_of_shared_run(scratch("bad_missing_file") / "run");
  fs::remove(checkpoint(run, kStep4) / "optimizer.safetensors");
  const auto before = hash_tree(run);
  check_refused(resume_args(run, "--set train.steps=6 --resume " + checkpoint(run, kStep4).string()), 4,
                {kStep4, "optimizer.safetensors is listed but missing"});
  CATCH_CHECK(hash_tree(run) == before);
  fs::remove_all(run.parent_path());
}

CATCH_TEST_CASE("bad input: a manifest that lies about a file's size", "[e2e][cli][checkpoint]") {
  const fs::path run = copy_of_shared_run(scratch("bad_lying_manifest") / "run");
  const fs::path dir = checkpoint(run, kStep4);
  nlohmann::json manifest = nlohmann::json::parse(slurp(dir / "manifest.json"));
  manifest["files"]["state.json"]["bytes"] = manifest["files"]["state.json"]["bytes"].get<int64_t>() + 1;
  std::ofstream(dir / "manifest.json") << manifest.dump(2) << "\n";
  const auto before = hash_tree(run);
  check_refused(resume_args(run, "--set train.steps=6 --resume " + dir.string()), 4,
                {kStep4, "state.json has", "the manifest says"});
  CATCH_CHECK(hash_tree(run) == before);
  fs::remove_all(run.parent_path());
}

// --- checkpoints that verify but do not belong ----------------------------------------------------------

CATCH_TEST_CASE("bad input: unknown state format version", "[e2e][cli][checkpoint]") {
  const fs::path run = copy_of_shared_run(scratch("bad_format") / "run");
  const fs::path dir = checkpoint(run, kStep4);
  nlohmann::json state = nlohmann::json::parse(slurp(dir / "state.json"));
  state["format"] = 99;
  std::ofstream(dir / "state.json") << state.dump(2) << "\n";
  rehash_manifest(dir);
  const auto before = hash_tree(run);
  check_refused(resume_args(run, "--set train.steps=6 --resume " + dir.string()), 4,
                {"state.json", "state format 99", "supported 1"});
  CATCH_CHECK(hash_tree(run) == before);
  fs::remove_all(run.parent_path());
}

CATCH_TEST_CASE("bad input: resume with another architecture lists every mismatched field",
                "[e2e][cli][checkpoint]") {
  const fs::path run = copy_of_shared_run(scratch("bad_architecture") / "run");
  const fs::path fork = run.parent_path() / "fork";
  const auto before = hash_tree(run);
  check_refused(
      retrieval_run_args("--set train.steps=6 --set model.d_model=64 --set model.n_layers=2 --resume " +
                         checkpoint(run, kStep4).string() + " --run-dir " + fork.string()),
      4, {"model.d_model: checkpoint 32, requested 64", "model.n_layers: checkpoint 1, requested 2"});
  CATCH_CHECK(hash_tree(run) == before);
  CATCH_CHECK(!fs::exists(fork));
  fs::remove_all(run.parent_path());
}

// A text run of its own: its data files are what these cases change.
CATCH_TEST_CASE("bad input: resume after the data changed (fingerprint) or its tokenizer did",
                "[e2e][cli][checkpoint]") {
  const fs::path dir = scratch("bad_data_changed");
  fs::create_directories(dir);
  write_byte_docs((dir / "train.tok").string(), {"the cat sat on the mat", "a dog ran"});
  write_byte_docs((dir / "val.tok").string(), {"the cat sat"});
  const std::string config = write_file(dir, "text.json",
                                        R"({"model": {"d_model": 16, "n_layers": 1, "max_seq_len": 16},
    "data": {"kind": "text", "train": ")" + (dir / "train.tok").string() +
                                            R"(", "val": ")" + (dir / "val.tok").string() +
                                            R"(", "seq_len": 16}, "train": {"steps": 2, "batch_size": 2}})")
                                 .string();
  const fs::path run = dir / "run";
  const std::string train = "train --config " + config + " --run-dir " + run.string();
  CATCH_REQUIRE(run_causal(train).code == 0);
  const auto before = hash_tree(run);

  // Same documents and token count, one byte different: only the fingerprint tells.
  write_byte_docs((dir / "train.tok").string(), {"the cat sat on the hat", "a dog ran"});
  check_refused(train + " --set train.steps=4", 4, {"cannot continue", "training data train_sha256"});
  CATCH_CHECK(hash_tree(run) == before);

  // The same ids recorded as imported tokens (another trainer's ids, no tokenizer model).
  causal::TokenizerInfo other = causal::ByteTokenizer().info();
  other.name = causal::kImportedTokenizer;
  causal::write_token_file((dir / "train.tok").string(), other, {256, 97, 98, 257, 256, 99, 257}, {0, 4});
  causal::write_token_file((dir / "val.tok").string(), other, {256, 97, 257}, {0});
  check_refused(train + " --set train.steps=4", 4,
                {"training data tokenizer: checkpoint \"bytes\", now \"imported\""});
  CATCH_CHECK(hash_tree(run) == before);
  fs::remove_all(dir);
}

// --- runtime -------------------------------------------------------------------------------------------

CATCH_TEST_CASE("bad input: output directory read-only, checked at start", "[unit][cli][runtime]") {
  const fs::path dir = scratch("bad_readonly");
  const bool mounted = mount_tmpfs(dir, "size=1m");
  if (mounted) {
    ::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr);
  } else if (::geteuid() != 0) {
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  } else {
    CAUSAL_SKIP_TEST("root without permission to mount: a read-only directory cannot be made here");
  }
  check_refused(retrieval_run_args("--run-dir " + (dir / "run").string()), 2,
                {(dir / "run").string(), "cannot write in " + dir.string()});
  if (mounted) ::umount(dir.c_str());
  fs::permissions(dir, fs::perms::owner_all);
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: output directory full, checked at start", "[unit][cli][runtime]") {
  const fs::path dir = scratch("bad_full");
  if (!mount_tmpfs(dir, "size=64k"))
    CAUSAL_SKIP_TEST(
        "no permission to mount a small tmpfs: the full-disk start check is covered by "
        "tests/faults/faults");
  check_refused(retrieval_run_args("--run-dir " + (dir / "run").string()), 2,
                {(dir / "run").string(), "MiB free, the run needs about"});
  CATCH_CHECK(!fs::exists(dir / "run"));
  ::umount(dir.c_str());
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: a save failing part way removes its temporary and keeps every older checkpoint",
                "[e2e][cli][runtime]") {
  const fs::path run = copy_of_shared_run(scratch("bad_partial_save") / "run");
  const auto before = hash_tree(run / "checkpoints");
  check_refused(resume_args(run, "--set train.steps=8 --inject-fault save:partial@6"), 4,
                {"step_00000006", "No space left on device (injected fault save:partial@6)"},
                /*started=*/true);
  const auto after = hash_tree(run / "checkpoints");
  CATCH_CHECK(after == before);  // nothing pruned, no temporary left, LATEST as it was
  // The run continues from the newest committed checkpoint.
  const Result r = run_causal(resume_args(run, "--set train.steps=8"));
  CATCH_INFO(r.err);
  CATCH_CHECK(r.code == 0);
  CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains("resuming from " + checkpoint(run, kStep4).string()));
  fs::remove_all(run.parent_path());
}

// --- the command line ----------------------------------------------------------------------------------

// The byte tokenizer encodes every byte, so "a prompt outside the vocabulary" is a prompt for a model that
// has no text vocabulary at all.
CATCH_TEST_CASE("bad input: generate with a prompt for a model without a text vocabulary", "[e2e][cli]") {
  const fs::path run = copy_of_shared_run(scratch("bad_prompt") / "run");
  const auto before = hash_tree(run);
  check_refused("generate --run " + run.string() + " --prompt hi", 4,
                {kStep4, "retrieval model", "generate needs a text run"});
  CATCH_CHECK(hash_tree(run) == before);
  fs::remove_all(run.parent_path());
}
