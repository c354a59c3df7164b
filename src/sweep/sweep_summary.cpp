// The sweep summary table and its CSV and JSON files.
#include "sweep/sweep_summary.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "io/atomic_file.h"

namespace causal {
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

void flatten_into(const json& value, const std::string& prefix, std::map<std::string, double>& out) {
  auto join = [&](const std::string& key) { return prefix.empty() ? key : prefix + "." + key; };
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) flatten_into(child, join(key), out);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) flatten_into(value[i], join(std::to_string(i)), out);
  } else if (value.is_number()) {
    out[prefix] = value.get<double>();
  }
}

// A CSV field: quoted when it holds a comma, quote or line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A field as JSON: whole numbers as integers (counts read 384, not 384.0), others as doubles, which
// nlohmann writes in the shortest form that reads back to the same value; non-finite ones as null.
ordered_json field_json(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return static_cast<int64_t>(v);
  return v;
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return field_json(v).dump();
}

void add_group_stats(SummaryGroup& group, const std::vector<SummaryRow>& rows) {
  std::map<std::string, std::vector<double>> samples;
  for (size_t r : group.rows) {
    for (const auto& [field, v] : rows[r].fields) samples[field].push_back(v);
  }
  for (const auto& [field, xs] : samples) {
    double sum = 0.0;
    for (double x : xs) sum += x;
    const double mean = sum / static_cast<double>(xs.size());
    double sq = 0.0;
    for (double x : xs) sq += (x - mean) * (x - mean);
    group.count[field] = xs.size();
    group.mean[field] = mean;
    group.std[field] = xs.size() > 1 ? std::sqrt(sq / static_cast<double>(xs.size() - 1)) : NAN;
  }
}

}  // namespace

std::map<std::string, double> flatten_numbers(const json& value) {
  std::map<std::string, double> out;
  flatten_into(value, "", out);
  return out;
}

SweepSummary summarize_sweep(const SweepSpec& spec, const std::vector<PointResult>& points) {
  SweepSummary s;
  for (const GridAxis& axis : spec.grid) s.grid_keys.push_back(axis.key);
  s.group_by = spec.group_by;
  std::set<std::string> seen;
  for (const PointResult& p : points) {
    SummaryRow row;
    row.point = p.point.name;
    row.state = point_state_name(p.state);
    row.run_dir = p.run_dir;
    if (p.state == PointState::kFailed) row.error = "exit " + std::to_string(p.exit_code) + ": " + p.error;
    row.values = p.point.values;
    if (p.results.is_object()) row.fields = flatten_numbers(p.results);
    for (const auto& [field, v] : row.fields) {
      if (seen.insert(field).second) s.columns.push_back(field);
    }
    s.rows.push_back(std::move(row));
  }
  s.metric = spec.metric.empty() && !s.columns.empty() ? s.columns.front() : spec.metric;
  for (size_t r = 0; r < s.rows.size(); ++r) {
    std::vector<std::pair<std::string, json>> key;
    for (const auto& kv : s.rows[r].values) {
      if (kv.first != kSeedKey) key.push_back(kv);
    }
    auto it = std::find_if(s.groups.begin(), s.groups.end(),
                           [&](const SummaryGroup& g) { return g.values == key; });
    if (it == s.groups.end()) {
      s.groups.push_back(SummaryGroup{key, {}, {}, {}, {}});
      it = s.groups.end() - 1;
    }
    it->rows.push_back(r);
  }
  for (SummaryGroup& g : s.groups) add_group_stats(g, s.rows);
  return s;
}

std::string summary_csv(const SweepSummary& s) {
  std::ostringstream o;
  o << "point,state";
  for (const std::string& key : s.grid_keys) o << "," << csv_field(key);
  for (const std::string& column : s.columns) o << "," << csv_field(column);
  o << ",error\n";
  for (const SummaryRow& row : s.rows) {
    o << csv_field(row.point) << "," << row.state;
    for (const auto& [key, value] : row.values)
      o << "," << csv_field(value.is_string() ? value.get<std::string>() : value.dump());
    for (const std::string& column : s.columns) {
      const auto it = row.fields.find(column);
      o << "," << (it == row.fields.end() ? "" : csv_number(it->second));
    }
    o << "," << csv_field(row.error) << "\n";
  }
  return o.str();
}

ordered_json summary_json(const SweepSummary& s) {
  ordered_json out;
  out["metric"] = s.metric;
  out["group_by"] = s.group_by;
  out["grid_keys"] = s.grid_keys;
  out["columns"] = s.columns;
  ordered_json rows = ordered_json::array();
  for (const SummaryRow& row : s.rows) {
    ordered_json r;
    r["point"] = row.point;
    r["state"] = row.state;
    r["run_dir"] = row.run_dir;
    for (const auto& [key, value] : row.values) r[key] = value;
    for (const auto& [field, v] : row.fields) r[field] = field_json(v);
    if (!row.error.empty()) r["error"] = row.error;
    rows.push_back(r);
  }
  out["rows"] = rows;
  ordered_json groups = ordered_json::array();
  for (const SummaryGroup& g : s.groups) {
    ordered_json values = ordered_json::object();
    for (const auto& [key, value] : g.values) values[key] = value;
    ordered_json points = ordered_json::array();
    for (size_t r : g.rows) points.push_back(s.rows[r].point);
    ordered_json stats = ordered_json::object();
    for (const auto& [field, mean] : g.mean) {
      stats[field] = {
          {"n", g.count.at(field)}, {"mean", field_json(mean)}, {"std", field_json(g.std.at(field))}};
    }
    groups.push_back({{"values", values}, {"points", points}, {"fields", stats}});
  }
  out["groups"] = groups;
  return out;
}

void write_summary_files(const fs::path& out, const SweepSummary& summary) {
  io_as<RunFolderError>([&] {
    write_file_atomically(out / "summary.csv", summary_csv(summary));
    write_file_atomically(out / "summary.json", summary_json(summary).dump(2) + "\n");
  });
}

}  // namespace causal
