// Config files in and out: read (// comments allowed) -> overrides -> resolve -> validate, and back to JSON.
#include "config/config_io.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/json_fields.h"
#include "config/vocab_auto.h"

namespace causal {
namespace {

// The left side of "dotted.path=value", as it names the override in errors.
std::string override_path(const std::string& assignment) {
  std::string path = assignment.substr(0, assignment.find('='));
  const std::size_t begin = path.find_first_not_of(" \t");
  const std::size_t end = path.find_last_not_of(" \t");
  return begin == std::string::npos ? "" : path.substr(begin, end - begin + 1);
}

bool path_within(const std::string& path, const std::string& prefix) {
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

// Whether `text` names `path` as a whole dotted path ("model.d_model 30 must be divisible by ...").
bool mentions(const std::string& text, const std::string& path) {
  auto part_of_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  };
  for (std::size_t at = text.find(path); at != std::string::npos; at = text.find(path, at + 1)) {
    const std::size_t end = at + path.size();
    if ((at == 0 || !part_of_name(text[at - 1])) && (end == text.size() || !part_of_name(text[end])))
      return true;
  }
  return false;
}

// A config is one JSON object.
void check_top_level(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) {
    throw ConfigError(source, "", "expected a JSON object at the top level, got " + json_fields::describe(j));
  }
}

}  // namespace

RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides, ConfigScope scope,
                      const DataVocab& data_vocab) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(path, "", "is a directory, expected a JSON config file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", std::string("cannot open the config file: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw ConfigError(path, "", std::string("cannot read the config file: ") + std::strerror(errno));
  return parse_config_text(text.str(), path, overrides, scope, data_vocab);
}

RunConfig parse_config_text(const std::string& text, const std::string& source,
                            const std::vector<std::string>& overrides, ConfigScope scope,
                            const DataVocab& data_vocab) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    // Syntax errors carry "at line L, column C"; a number overflow ("1e400") carries only the literal.
    throw ConfigError(source, "", json_fields::exception_text(e));
  }
  check_top_level(j, source);
  RunConfig config;
  mark_vocab_auto(j);
  json_fields::read_value(j, config, source, "");
  for (const std::string& assignment : overrides) apply_override(config, assignment);
  resolve(config, data_vocab);
  try {
    validate(config, source, scope);
  } catch (const ConfigError& e) {
    // A value that came from --set is blamed on that flag, not on the file that no longer holds it: the
    // flag that set the field at fault, else the last one whose field the problem names (cross-field checks
    // such as "model.d_model 30 must be divisible by model.n_heads 4" sit at one of their fields).
    const std::string& problem = e.problem();
    std::string blamed;
    for (auto it = overrides.rbegin(); it != overrides.rend() && blamed.empty(); ++it) {
      if (path_within(e.path(), override_path(*it))) blamed = override_path(*it);
    }
    for (auto it = overrides.rbegin(); it != overrides.rend() && blamed.empty(); ++it) {
      if (mentions(problem, override_path(*it))) blamed = override_path(*it);
    }
    if (blamed.empty()) throw;
    throw ConfigError("--set " + blamed, e.path(), problem);
  }
  return config;
}

RunConfig read_stored_config(const nlohmann::json& stored, const std::string& source) {
  check_top_level(stored, source);
  nlohmann::json j = stored;
  mark_vocab_auto(j);
  RunConfig config;
  json_fields::read_value(j, config, source, "");
  resolve(config);
  return config;
}

nlohmann::json config_to_json(const RunConfig& config) {
  RunConfig copy = config;
  return json_fields::write_value<nlohmann::json>(copy);
}

std::string config_to_string(const RunConfig& config) {
  // ordered_json keeps declaration order, so the saved file reads like config.h.
  RunConfig copy = config;
  return json_fields::write_value<nlohmann::ordered_json>(copy).dump(2);
}

}  // namespace causal
