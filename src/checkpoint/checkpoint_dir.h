// Checkpoint directories that never lose work: files are written into a temporary sibling, fsynced,
// listed with size and SHA-256 in manifest.json (written last), renamed into place, and only then is
// LATEST replaced. A directory whose manifest is missing or does not match its files is never used.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace causal {

// "step_00000042": fixed width so names sort by step.
std::string checkpoint_name(int64_t step);

// Creates root/step_NNNNNNNN from what `write_files` puts into the (temporary) directory it is given.
// Returns the final directory. Throws CheckpointError if it exists already or on any IO failure; the
// temporary is removed then, and LATEST still names the previous complete checkpoint.
std::filesystem::path commit_checkpoint(const std::filesystem::path& root, int64_t step,
                                        const std::function<void(const std::filesystem::path&)>& write_files);

// Checks every file the manifest lists (size and SHA-256) and that no listed file is missing;
// returns the manifest. Throws CheckpointError naming the directory and the first mismatch.
nlohmann::json verify_checkpoint(const std::filesystem::path& dir);

// The newest step_* directory that verifies (LATEST is only a hint for readers); nullopt if none.
std::optional<std::filesystem::path> latest_valid_checkpoint(const std::filesystem::path& root);

// The step_* directories newer than `valid` that do not verify (a crash or a bad disk spoiled them), each
// renamed to root/invalid-step_NNNNNNNN (kept for inspection, never loaded) so the run can write those
// steps again. Returns "step_NNNNNNNN (why)" for each, newest first.
std::vector<std::string> set_aside_invalid_after(const std::filesystem::path& root,
                                                 const std::filesystem::path& valid);

// Why the newest step_* directory under root does not verify ("" when it does or there is none).
std::string newest_checkpoint_problem(const std::filesystem::path& root);

// Removes temporaries left by a crash during commit_checkpoint (called at start-up).
void remove_stale_temporaries(const std::filesystem::path& root);

// Keeps the `keep` newest step_* directories (keep >= 1); the newest complete one is never removed, nor
// `pinned` (an adapter run's base) when it is one of them.
void prune_checkpoints(const std::filesystem::path& root, int64_t keep,
                       const std::filesystem::path& pinned = {});

}  // namespace causal
