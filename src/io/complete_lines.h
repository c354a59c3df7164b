// Reading a line-oriented file while another process appends to it (metrics.jsonl during training): only
// lines that end in '\n' count, so a reader never takes a row that is still being written for a whole one.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace causal {

// The lines of `path` that end in '\n' (without it); a trailing line without one is left out, and
// `partial_tail` (when given) says whether there was one. An absent or unreadable file gives no lines.
std::vector<std::string> read_complete_lines(const std::filesystem::path& path, bool* partial_tail = nullptr);

}  // namespace causal
