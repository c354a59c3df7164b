// libFuzzer harness: a checkpoint's manifest.json, through verify_checkpoint and the directory scans every
// reader and resume makes (latest_valid_checkpoint, newest_checkpoint_problem).
#include <filesystem>
#include <string>

#include "checkpoint/checkpoint_dir.h"
#include "fuzz_support.h"

using namespace causal;
namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A run's checkpoints/ with one step directory: two small files a manifest may list, and the input as
  // its manifest. Outside the run folder, a file no manifest may reach.
  static const fs::path root = [] {
    const fs::path r = fuzz::scratch_dir() / "run" / "checkpoints";
    fs::create_directories(r / "step_00000004");
    const std::string hello = "hello";
    fuzz::write_input("run/checkpoints/step_00000004/state.json", reinterpret_cast<const uint8_t*>("{}"), 2);
    fuzz::write_input("run/checkpoints/step_00000004/model.safetensors",
                      reinterpret_cast<const uint8_t*>(hello.data()), hello.size());
    fuzz::write_input("outside.txt", reinterpret_cast<const uint8_t*>(hello.data()), hello.size());
    return r;
  }();
  fuzz::write_input("run/checkpoints/step_00000004/manifest.json", data, size);
  bool valid = false;
  try {
    const nlohmann::json manifest = verify_checkpoint(root / "step_00000004");
    valid = true;
    // Whatever verified names only files inside the checkpoint directory.
    for (const auto& [name, entry] : manifest.at("files").items()) {
      const fs::path file = fs::weakly_canonical(root / "step_00000004" / name);
      fuzz::require(file.parent_path() == fs::weakly_canonical(root / "step_00000004"),
                    "a manifest names files inside its checkpoint");
    }
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  try {
    const auto latest = latest_valid_checkpoint(root);
    fuzz::require(latest.has_value() == valid, "latest_valid_checkpoint agrees with verify_checkpoint");
    fuzz::require(newest_checkpoint_problem(root).empty() == valid, "newest_checkpoint_problem agrees");
  } catch (const Error&) {
    fuzz::require(false, "the directory scans never throw for a bad manifest");
  }
  return 0;
}
