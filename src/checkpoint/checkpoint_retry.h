// Reading a run's newest checkpoint beside the run that writes it: pruning may remove the checkpoint a
// reader picked while it reads it. The reader then picks the newest again, once.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace causal {

// Runs `read` on the checkpoint find_checkpoint(run_dir, ref) names. When `ref` asks for the newest ("" or
// a run folder) and `read` throws after that checkpoint vanished (a file of it, or all of it, is gone), the
// newest is found again and read once more; if that one vanishes too, CheckpointError (exit 4) names both
// and says to run the command again. Any other error passes through unchanged.
void read_newest_checkpoint(const std::filesystem::path& run_dir, const std::string& ref,
                            const std::function<void(const std::filesystem::path&)>& read);

}  // namespace causal
