// One retry for readers whose checkpoint was pruned under them.
#include "checkpoint/checkpoint_retry.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "core/errors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// Pruning removes whole directories, file by file: a checkpoint missing its manifest or any file the
// manifest lists is on its way out (a damaged one keeps its files: that is not a vanished one).
bool vanished(const fs::path& dir) {
  std::error_code ec;
  std::ifstream in(dir / "manifest.json");
  if (!in) return true;
  const nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_object() || !manifest.contains("files") || !manifest["files"].is_object()) return false;
  for (const auto& item : manifest["files"].items()) {
    if (!fs::exists(dir / item.key(), ec)) return true;
  }
  return false;
}

}  // namespace

void read_newest_checkpoint(const fs::path& run_dir, const std::string& ref,
                            const std::function<void(const fs::path&)>& read) {
  const bool newest = ref.empty() || fs::is_directory(fs::path(ref) / "checkpoints");
  fs::path first;
  try {
    first = find_checkpoint(run_dir, ref);
  } catch (const CheckpointError&) {
    // Every directory listed may have been pruned while it was verified: the list once more.
    if (!newest) throw;
    first = find_checkpoint(run_dir, ref);
  }
  try {
    read(first);
    return;
  } catch (const Error&) {
    if (!newest || !vanished(first)) throw;
  }
  const fs::path second = find_checkpoint(run_dir, ref);
  try {
    read(second);
  } catch (const Error&) {
    if (!vanished(second)) throw;
    throw CheckpointError("[checkpoint] " + second.string() + " was removed while it was read, after " +
                          first.string() + " was too (pruned by the run writing " +
                          (ref.empty() ? run_dir.string() : ref) + "); run the command again");
  }
}

}  // namespace causal
