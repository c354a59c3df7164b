// Sweep files, --grid flags, the grid product and its folder names, and up-front validation of every point.
#include "sweep/sweep_spec.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/config_io.h"
#include "config/json_fields.h"
#include "core/errors.h"
#include "data/token_file.h"

namespace causal {
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const std::vector<std::string> kSweepKeys{"config", "grid", "set", "metric", "group_by", "out"};

std::string describe_value(const ordered_json& value) { return json_fields::describe(json(value)); }

std::string sweep_string_field(const ordered_json& file, const std::string& key, const std::string& source) {
  const ordered_json& v = file.at(key);
  if (!v.is_string() || v.get<std::string>().empty())
    throw ConfigError(source, key, "expected a non-empty string, got " + describe_value(v));
  return v.get<std::string>();
}

bool is_scalar_value(const ordered_json& v) { return v.is_string() || v.is_number() || v.is_boolean(); }

std::string last_key_part(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string folder_safe_name(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' ||
                    c == '-' || c == '=' || c == ',';
    out += ok ? c : '_';
  }
  return out;
}

}  // namespace

std::string value_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::vector<std::string> SweepPoint::overrides() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : values) out.push_back(key + "=" + value_text(value));
  return out;
}

SweepSpec load_sweep_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || fs::is_directory(path))
    throw ConfigError(path, "", std::string("cannot open the sweep file: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  ordered_json file;
  try {
    // ordered: the grid's key order is the product's order and the chart's default x axis.
    file = ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {
    throw ConfigError(path, "", json_fields::exception_text(e));
  }
  if (!file.is_object())
    throw ConfigError(path, "", "expected a JSON object at the top level, got " + describe_value(file));
  for (const auto& [key, value] : file.items()) {
    bool known = false;
    for (const std::string& k : kSweepKeys) known = known || k == key;
    if (!known) {
      throw ConfigError(
          path, key,
          "unknown key '" + key + "'; a sweep file holds config, grid, set, metric, group_by, out");
    }
  }
  SweepSpec spec;
  spec.source = path;
  if (!file.contains("config")) throw ConfigError(path, "config", "missing; expected the base config file");
  const fs::path config = sweep_string_field(file, "config", path);
  spec.config =
      (config.is_absolute() ? config : fs::path(path).parent_path() / config).lexically_normal().string();
  if (file.contains("grid")) {
    const ordered_json& grid = file["grid"];
    if (!grid.is_object())
      throw ConfigError(path, "grid", "expected an object of key: [values], got " + describe_value(grid));
    for (const auto& [key, values] : grid.items()) {
      const std::string where = "grid." + key;
      if (!values.is_array() || values.empty())
        throw ConfigError(path, where, "expected a non-empty array of values, got " + describe_value(values));
      GridAxis axis{key, {}};
      for (const ordered_json& v : values) {
        if (!is_scalar_value(v))
          throw ConfigError(path, where, "expected strings, numbers or booleans, got " + describe_value(v));
        axis.values.push_back(json(v));
      }
      spec.grid.push_back(std::move(axis));
    }
  }
  if (file.contains("set")) {
    const ordered_json& set = file["set"];
    if (!set.is_object())
      throw ConfigError(path, "set", "expected an object of key: value, got " + describe_value(set));
    for (const auto& [key, value] : set.items()) {
      if (!is_scalar_value(value))
        throw ConfigError(path, "set." + key,
                          "expected a string, number or boolean, got " + describe_value(value));
      spec.set.push_back(key + "=" + value_text(json(value)));
    }
  }
  if (file.contains("metric")) spec.metric = sweep_string_field(file, "metric", path);
  if (file.contains("group_by")) spec.group_by = sweep_string_field(file, "group_by", path);
  if (file.contains("out")) spec.out = sweep_string_field(file, "out", path);
  return spec;
}

void apply_grid_flag(SweepSpec& spec, const std::string& flag) {
  const size_t eq = flag.find('=');
  const std::string key = flag.substr(0, eq);
  if (eq == std::string::npos || key.empty() || eq + 1 == flag.size())
    throw UsageError("--grid " + flag + ": expected key=v1,v2,... (e.g. --grid seed=1,2,3)");
  GridAxis axis{key, {}};
  std::stringstream values(flag.substr(eq + 1));
  for (std::string v; std::getline(values, v, ',');) {
    if (v.empty()) throw UsageError("--grid " + flag + ": empty value in the list");
    // Numbers and booleans as such (the summary charts them on a numeric axis); the rest as text. Either
    // way the field types the value when it is applied as --set.
    const json parsed = json::parse(v, nullptr, /*allow_exceptions=*/false);
    axis.values.push_back(parsed.is_number() || parsed.is_boolean() ? parsed : json(v));
  }
  for (GridAxis& existing : spec.grid) {
    if (existing.key == key) {
      existing.values = std::move(axis.values);
      return;
    }
  }
  spec.grid.push_back(std::move(axis));
}

void finish_sweep_spec(SweepSpec& spec, const std::string& config_name) {
  if (spec.config.empty()) throw UsageError("sweep: --config or --sweep is required");
  if (spec.grid.empty())
    throw UsageError("sweep: no grid; give --grid key=v1,v2 (or a sweep file's \"grid\")");
  std::set<std::string> keys;
  for (const GridAxis& axis : spec.grid) {
    if (!keys.insert(axis.key).second) throw UsageError("sweep: grid key " + axis.key + " given twice");
  }
  if (spec.group_by.empty()) spec.group_by = spec.grid.front().key;
  if (!keys.count(spec.group_by)) {
    const std::string where = spec.source.empty() ? "--group-by" : spec.source;
    throw ConfigError(where, "group_by", "'" + spec.group_by + "' is not a grid key");
  }
  if (spec.out.empty()) spec.out = (fs::path("runs") / (config_name + "-sweep")).string();
}

std::vector<SweepPoint> grid_points(const SweepSpec& spec) {
  std::map<std::string, int> short_names;
  for (const GridAxis& axis : spec.grid) ++short_names[last_key_part(axis.key)];
  std::vector<SweepPoint> points{SweepPoint{}};
  for (const GridAxis& axis : spec.grid) {
    std::vector<SweepPoint> next;
    for (const SweepPoint& prefix : points) {
      for (const json& value : axis.values) {
        SweepPoint p = prefix;
        p.values.emplace_back(axis.key, value);
        next.push_back(std::move(p));
      }
    }
    points = std::move(next);
  }
  std::map<std::string, std::string> taken;  // folder name -> the point's values, for the error
  for (SweepPoint& p : points) {
    std::string name, plain;
    for (const auto& [key, value] : p.values) {
      const std::string label = short_names[last_key_part(key)] > 1 ? key : last_key_part(key);
      name += (name.empty() ? "" : ",") + label + "=" + value_text(value);
      plain += (plain.empty() ? "" : " ") + key + "=" + value_text(value);
    }
    p.name = folder_safe_name(name);
    if (p.name.size() > 200) p.name = p.name.substr(0, 200);
    const auto [at, inserted] = taken.emplace(p.name, plain);
    if (!inserted) {
      throw ConfigError(spec.source.empty() ? "--grid" : spec.source, "grid",
                        "points " + at->second + " and " + plain + " share the folder name " + p.name +
                            "; make the values differ in letters or digits");
    }
  }
  return points;
}

std::vector<RunConfig> resolve_points(const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  std::vector<RunConfig> configs;
  for (const SweepPoint& p : points) {
    std::vector<std::string> overrides = spec.set;
    for (const std::string& o : p.overrides()) overrides.push_back(o);
    try {
      configs.push_back(load_config(spec.config, overrides, ConfigScope::kRun, train_vocab_size));
    } catch (const ConfigError& e) {
      throw ConfigError("sweep point " + p.name, "", e.what());
    }
  }
  return configs;
}

ordered_json sweep_to_json(const SweepSpec& spec, const std::vector<SweepPoint>& points) {
  ordered_json out;
  out["config"] = fs::absolute(spec.config).lexically_normal().string();
  if (!spec.source.empty()) out["sweep_file"] = spec.source;
  ordered_json grid = ordered_json::object();
  for (const GridAxis& axis : spec.grid) grid[axis.key] = axis.values;
  out["grid"] = grid;
  out["set"] = spec.set;
  out["metric"] = spec.metric;
  out["group_by"] = spec.group_by;
  out["out"] = spec.out;
  ordered_json list = ordered_json::array();
  for (const SweepPoint& p : points) {
    ordered_json values = ordered_json::object();
    for (const auto& [key, value] : p.values) values[key] = value;
    list.push_back({{"name", p.name}, {"values", values}});
  }
  out["points"] = list;
  return out;
}

}  // namespace causal
