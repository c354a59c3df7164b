// Error texts: one line each, whatever the message was built from.
#include "core/errors.h"

namespace causal {
namespace {

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string compose(const std::string& source, const std::string& path, const std::string& problem) {
  std::string out = source + ": ";
  if (!path.empty()) out += path + ": ";
  return out + problem;
}

}  // namespace

Error::Error(const std::string& message) : std::runtime_error(one_line(message)) {}

ConfigError::ConfigError(const std::string& source, const std::string& path, const std::string& problem)
    : Error(compose(source, path, problem)), source_(source), path_(path), problem_(problem) {}

}  // namespace causal
