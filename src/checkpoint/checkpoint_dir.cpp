// Atomic checkpoint directories with manifests.
#include "checkpoint/checkpoint_dir.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/json_integer.h"
#include "io/sha256.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

constexpr const char* kTempPrefix = ".tmp-";
constexpr const char* kManifest = "manifest.json";

constexpr const char* kLatest = "LATEST";

bool is_step_dir(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.rfind("step_", 0) == 0 && fs::is_directory(p);
}

// step_* directories, newest first.
std::vector<fs::path> step_dirs(const fs::path& root) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (is_step_dir(entry.path())) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() > b.filename(); });
  return dirs;
}

bool verifies(const fs::path& dir) {
  try {
    verify_checkpoint(dir);
    return true;
  } catch (const CheckpointError&) {
    return false;
  }
}

}  // namespace

std::string checkpoint_name(int64_t step) { return fmt::format("step_{:08}", step); }

fs::path commit_checkpoint(const fs::path& root, int64_t step,
                           const std::function<void(const fs::path&)>& write_files) {
  const fs::path final_dir = root / checkpoint_name(step);
  const fs::path temp = root / (kTempPrefix + checkpoint_name(step));
  if (fs::exists(final_dir)) throw CheckpointError("[checkpoint] " + final_dir.string() + " exists already");
  std::error_code ec;
  fs::remove_all(temp, ec);
  fs::create_directories(temp);
  try {
    write_files(temp);
    nlohmann::json files = nlohmann::json::object();
    for (const auto& entry : fs::directory_iterator(temp)) {
      if (!entry.is_regular_file()) continue;
      fsync_path(entry.path());
      files[entry.path().filename().string()] = {{"bytes", fs::file_size(entry.path())},
                                                 {"sha256", sha256_file(entry.path().string())}};
    }
    // The manifest comes last: its presence is what marks the files as complete.
    write_file_synced(temp / kManifest, nlohmann::json{{"step", step}, {"files", files}}.dump(2) + "\n");
    fsync_path(temp);
    fs::rename(temp, final_dir);
    fsync_path(root);
    // LATEST is replaced by a rename too, so a reader sees the old name or the new one, never half of one.
    write_file_atomically(root / kLatest, checkpoint_name(step) + "\n");
  } catch (const CheckpointError&) {
    fs::remove_all(temp, ec);
    throw;
  } catch (const std::exception& e) {
    fs::remove_all(temp, ec);
    throw CheckpointError("[checkpoint] writing " + final_dir.string() + " failed: " + e.what());
  }
  return final_dir;
}

nlohmann::json verify_checkpoint(const fs::path& dir) {
  const std::string where = "[checkpoint] " + dir.string() + ": ";
  std::ifstream in(dir / kManifest);
  if (!in) throw CheckpointError(where + "no manifest.json (an incomplete checkpoint is never loaded)");
  nlohmann::json manifest;
  try {
    in >> manifest;
    for (const auto& [name, entry] : manifest.at("files").items()) {
      // A name with a folder in it ("../x", "/etc/y") would vouch for a file outside the checkpoint.
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
          name.find('\0') != std::string::npos)
        throw CheckpointError(where + "manifest.json lists '" + name + "', not a file name inside " +
                              dir.string());
      const fs::path file = dir / name;
      // The error_code forms: a listed name the file system refuses (too long) is a missing file, not a
      // filesystem_error escaping the reader.
      std::error_code ec;
      if (!fs::is_regular_file(file, ec)) throw CheckpointError(where + name + " is listed but missing");
      const uintmax_t size = fs::file_size(file, ec);
      if (ec) throw CheckpointError(where + name + " is listed but unreadable: " + ec.message());
      if (!json_integer_fits<uint64_t>(entry.at("bytes")))
        throw CheckpointError(
            where + "manifest.json gives " + name + " a size that is not a byte count: " +
            entry.at("bytes").dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      const auto bytes = entry.at("bytes").get<uint64_t>();
      if (size != bytes) {
        throw CheckpointError(where + name + " has " + std::to_string(size) + " bytes, the manifest says " +
                              std::to_string(bytes));
      }
      if (io_as<CheckpointError>([&] { return sha256_file(file.string()); }) !=
          entry.at("sha256").get<std::string>()) {
        throw CheckpointError(where + name + " does not match its sha256 in the manifest (corrupted)");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(where + "malformed manifest.json: " + e.what());
  }
  return manifest;
}

std::optional<fs::path> latest_valid_checkpoint(const fs::path& root) {
  // The newest directory that verifies, not LATEST: a crash between a checkpoint's rename and the
  // replacement of LATEST leaves LATEST one behind, and continuing from there would collide with the
  // newer directory at its next save.
  for (const fs::path& dir : step_dirs(root)) {
    if (verifies(dir)) return dir;
  }
  return std::nullopt;
}

std::vector<std::string> set_aside_invalid_after(const fs::path& root, const fs::path& valid) {
  std::vector<std::string> set_aside;
  for (const fs::path& dir : step_dirs(root)) {
    if (dir.filename() <= valid.filename()) break;
    std::string why;
    try {
      verify_checkpoint(dir);
      continue;
    } catch (const CheckpointError& e) {
      why = e.what();
    }
    fs::path target = root / ("invalid-" + dir.filename().string());
    for (int i = 2; fs::exists(target); ++i)
      target = root / ("invalid-" + dir.filename().string() + "-" + std::to_string(i));
    std::error_code ec;
    fs::rename(dir, target, ec);
    if (ec) throw CheckpointError("[checkpoint] cannot set aside " + dir.string() + ": " + ec.message());
    set_aside.push_back(dir.filename().string() + " (" + why.substr(why.find(": ") + 2) + ")");
  }
  return set_aside;
}

std::string newest_checkpoint_problem(const fs::path& root) {
  const std::vector<fs::path> dirs = step_dirs(root);
  if (dirs.empty()) return "";
  try {
    verify_checkpoint(dirs.front());
    return "";
  } catch (const CheckpointError& e) {
    return e.what();
  }
}

void remove_stale_temporaries(const fs::path& root) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    // Checkpoint temporaries and an interrupted replacement of LATEST (io/atomic_file's temporaries).
    const std::string name = entry.path().filename().string();
    if (name.rfind(kTempPrefix, 0) == 0 || name.rfind(std::string(".") + kLatest + ".tmp-", 0) == 0)
      fs::remove_all(entry.path(), ec);
  }
}

void prune_checkpoints(const fs::path& root, int64_t keep, const fs::path& pinned) {
  const std::optional<fs::path> newest_complete = latest_valid_checkpoint(root);
  const std::vector<fs::path> dirs = step_dirs(root);
  std::error_code ec;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(keep, 1)); i < dirs.size(); ++i) {
    if (newest_complete && dirs[i] == *newest_complete) continue;
    if (!pinned.empty() && fs::equivalent(dirs[i], pinned, ec)) continue;
    fs::remove_all(dirs[i], ec);
  }
}

}  // namespace causal
