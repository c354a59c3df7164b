// What `causal sweep` runs: a base config, the grid of fields to vary, fixed overrides and how to chart
// the results; read from a sweep file and/or flags, expanded into points with filesystem-safe names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace causal {

// One varied field and the values it takes, in the order given.
struct GridAxis {
  std::string key;                     // a config path as --set takes it: "model.position", "seed"
  std::vector<nlohmann::json> values;  // strings, numbers or booleans
};

struct SweepSpec {
  std::string source;            // the sweep file ("" when the sweep comes only from flags)
  std::string config;            // the base config file (a sweep file's entry is relative to it)
  std::vector<GridAxis> grid;    // the product is taken in this order (first key varies slowest)
  std::vector<std::string> set;  // "dotted.path=value" applied to every point before its grid values
  std::string metric;            // results.json field charted; "" = the first numeric one
  std::string group_by;          // grid key on the chart's x axis; "" = the first grid key
  std::string out;               // the sweep folder; "" = runs/<config name>-sweep
};

// One point of the grid: its values in grid order and the name of its run folder.
struct SweepPoint {
  std::string name;                                            // "position=rope,seed=2"
  std::vector<std::pair<std::string, nlohmann::json>> values;  // (grid key, value)
  std::vector<std::string> overrides() const;                  // "key=value" for --set
};

// Reads a sweep file: {"config", "grid", "set", "metric", "group_by", "out"}; `config` and nothing else is
// resolved relative to the file's folder (`out` is relative to the working directory, like --out). Throws
// ConfigError naming the file and key (unknown key, wrong type, empty grid value list).
SweepSpec load_sweep_file(const std::string& path);

// --grid key=v1,v2,...: adds the axis, or replaces the values of an axis of that key. Values are typed as
// --set types them (by the field). Throws UsageError for a malformed flag.
void apply_grid_flag(SweepSpec& spec, const std::string& flag);

// Fills `out` and `group_by` defaults and checks the whole: a config, at least one axis, no key twice,
// group_by among the grid keys. Throws UsageError/ConfigError.
void finish_sweep_spec(SweepSpec& spec, const std::string& config_name);

// A grid value as --set text: strings raw, everything else as JSON.
std::string value_text(const nlohmann::json& value);

// The cartesian product, first axis slowest. Names use each key's last dotted part ("position") unless two
// keys share it (then the whole key); characters outside [A-Za-z0-9._+-] become '_'. Throws ConfigError
// when two points would share a folder name.
std::vector<SweepPoint> grid_points(const SweepSpec& spec);

// The config of every point (base config + set + point values), resolved and validated before any run:
// a bad value fails the sweep up front with the point named (ConfigError).
std::vector<RunConfig> resolve_points(const SweepSpec& spec, const std::vector<SweepPoint>& points);

// The resolved sweep as written to sweep.json (and read back by the summary page).
nlohmann::ordered_json sweep_to_json(const SweepSpec& spec, const std::vector<SweepPoint>& points);

}  // namespace causal
