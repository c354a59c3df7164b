// Complete lines of a growing file.
#include "io/complete_lines.h"

#include <fstream>
#include <sstream>

namespace causal {

std::vector<std::string> read_complete_lines(const std::filesystem::path& path, bool* partial_tail) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  // One read, then split: the file may grow meanwhile, and what was read ends where it ends.
  const std::string bytes = text.str();
  std::vector<std::string> lines;
  size_t begin = 0;
  for (size_t end = bytes.find('\n'); end != std::string::npos; end = bytes.find('\n', begin)) {
    lines.push_back(bytes.substr(begin, end - begin));
    begin = end + 1;
  }
  if (partial_tail != nullptr) *partial_tail = begin < bytes.size();
  return lines;
}

}  // namespace causal
