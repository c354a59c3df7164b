// The sweep summary page (see sweep_page.h).
#include "sweep/sweep_page.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "io/atomic_file.h"
#include "io/run_files.h"
#include "review/html_page.h"
#include "review/svg_chart.h"

namespace causal {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using svg::xml_escape;

std::string value_label(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string values_text(const std::vector<std::pair<std::string, json>>& values) {
  std::string out;
  for (const auto& [key, value] : values) out += (out.empty() ? "" : ", ") + key + "=" + value_label(value);
  return out.empty() ? "(all points)" : out;
}

std::string field_cell(const std::map<std::string, double>& fields, const std::string& field) {
  const auto it = fields.find(field);
  return "<td class=\"num\">" +
         (it == fields.end() ? std::string("\u2014") : svg::format_number(it->second)) + "</td>";
}

std::string mean_std(const SummaryGroup& g, const std::string& field) {
  const auto it = g.mean.find(field);
  if (it == g.mean.end()) return "\u2014";
  const double sd = g.std.at(field);
  return svg::format_number(it->second) + (std::isfinite(sd) ? " \u00b1 " + svg::format_number(sd) : "");
}

// The page's link for a point: its report, else its results, else its log.
std::string point_link(const SummaryRow& row, const fs::path& out) {
  for (const char* file : {run_files::kReport, run_files::kResults}) {
    if (fs::exists(fs::path(row.run_dir) / file)) {
      const std::string href = row.point + "/" + file;
      return "<a href=\"" + xml_escape(href) + "\">" + file + "</a>";
    }
  }
  const std::string log = "logs/" + row.point + ".log";
  if (fs::exists(out / log)) return "<a href=\"" + xml_escape(log) + "\">log</a>";
  return "\u2014";
}

// Seeds on the x axis: each group's points against their seed, its mean as a dashed line.
std::string seed_chart(const SweepSummary& s, svg::LineChart chart) {
  chart.y_label = s.metric + " (dashed: mean over seeds)";
  chart.x_categories.clear();
  for (size_t k = 0; k < s.groups.size(); ++k) {
    const SummaryGroup& g = s.groups[k];
    svg::Series points;
    points.name = g.values.empty() ? s.metric : values_text(g.values);
    points.color = svg::palette_color(k);
    points.style = svg::SeriesStyle::kLineMarkers;
    for (size_t r : g.rows) {
      const auto v = s.rows[r].fields.find(s.metric);
      for (const auto& [key, value] : s.rows[r].values) {
        if (key == kSeedKey && value.is_number() && v != s.rows[r].fields.end()) {
          points.x.push_back(value.get<double>());
          points.y.push_back(v->second);
        }
      }
    }
    chart.series.push_back(points);
    if (g.mean.count(s.metric)) {
      chart.y_lines.push_back({g.mean.at(s.metric), "mean " + mean_std(g, s.metric), points.color});
    }
  }
  return svg::render_line_chart(chart);
}

// Fractions of items right get a 0..1 axis: the retrieval lab's accuracies and the benchmarks' acc and
// acc_norm (bench/<name>/acc, as results.json carries them).
bool fraction_metric(const std::string& metric) {
  const auto ends_with = [&](const std::string& tail) {
    return metric.size() >= tail.size() &&
           metric.compare(metric.size() - tail.size(), tail.size(), tail) == 0;
  };
  return metric.find("accuracy") != std::string::npos ||
         (metric.rfind("bench/", 0) == 0 && (ends_with("/acc") || ends_with("/acc_norm")));
}

// The metric of each group against the group_by value: mean with a std whisker, one ring per seed.
std::string metric_chart(const SweepSummary& s) {
  std::vector<json> xs;  // group_by values, grid order
  for (const SummaryRow& row : s.rows) {
    for (const auto& [key, value] : row.values) {
      if (key == s.group_by && std::find(xs.begin(), xs.end(), value) == xs.end()) xs.push_back(value);
    }
  }
  const bool numeric = std::all_of(xs.begin(), xs.end(), [](const json& v) { return v.is_number(); });
  svg::LineChart chart;
  chart.title = s.metric + " by " + s.group_by;
  chart.x_label = s.group_by;
  chart.y_label = s.metric + " (mean \u00b1 std over seeds; rings: each seed)";
  chart.width = 720;
  chart.integer_x =
      numeric && std::all_of(xs.begin(), xs.end(), [](const json& v) { return v.is_number_integer(); });
  if (!numeric) {
    for (const json& v : xs) chart.x_categories.push_back(value_label(v));
  }
  if (fraction_metric(s.metric)) {
    chart.y_min = 0.0;
    chart.y_max = 1.0;
  }
  auto x_of = [&](const json& v) {
    return numeric ? v.get<double>() : static_cast<double>(std::find(xs.begin(), xs.end(), v) - xs.begin());
  };
  if (s.group_by == kSeedKey) return seed_chart(s, chart);
  // One series per combination of the keys other than group_by and the seed.
  std::vector<std::vector<std::pair<std::string, json>>> series_keys;
  std::vector<svg::Series> means, rings;
  for (const SummaryGroup& g : s.groups) {
    std::vector<std::pair<std::string, json>> rest;
    json x;
    for (const auto& kv : g.values) {
      if (kv.first == s.group_by)
        x = kv.second;
      else
        rest.push_back(kv);
    }
    size_t k = std::find(series_keys.begin(), series_keys.end(), rest) - series_keys.begin();
    if (k == series_keys.size()) {
      series_keys.push_back(rest);
      svg::Series mean;
      mean.name = rest.empty() ? s.metric : values_text(rest);
      mean.color = svg::palette_color(k);
      mean.style = numeric ? svg::SeriesStyle::kLineMarkers : svg::SeriesStyle::kMarkers;
      mean.marker_radius = 4.5;
      mean.layer = 1;
      means.push_back(mean);
      svg::Series ring;
      ring.color = mean.color;
      ring.style = svg::SeriesStyle::kMarkers;
      ring.hollow = true;
      ring.marker_radius = 3.0;
      ring.opacity = 0.8;
      rings.push_back(ring);
    }
    const auto it = g.mean.find(s.metric);
    if (it == g.mean.end() || x.is_null()) continue;
    means[k].x.push_back(x_of(x));
    means[k].y.push_back(it->second);
    means[k].y_err.push_back(g.std.at(s.metric));
    for (size_t r : g.rows) {
      const auto v = s.rows[r].fields.find(s.metric);
      if (v == s.rows[r].fields.end()) continue;
      rings[k].x.push_back(x_of(x));
      rings[k].y.push_back(v->second);
    }
  }
  // On a category axis several series sit side by side around their category, so whiskers do not overlap.
  if (!numeric && means.size() > 1) {
    const double width = std::min(0.6, 0.15 * static_cast<double>(means.size()));
    for (size_t k = 0; k < means.size(); ++k) {
      const double shift = width * (static_cast<double>(k) / static_cast<double>(means.size() - 1) - 0.5);
      for (double& x : means[k].x) x += shift;
      for (double& x : rings[k].x) x += shift;
    }
  }
  for (svg::Series& r : rings) chart.series.push_back(std::move(r));
  for (svg::Series& m : means) chart.series.push_back(std::move(m));
  return svg::render_line_chart(chart);
}

std::string sweep_header(const SweepSummary& s, const SweepSpec& spec, const fs::path& out) {
  std::map<std::string, size_t> states;
  for (const SummaryRow& row : s.rows) ++states[row.state];
  std::string counts;
  for (const auto& [state, n] : states)
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  std::string grid;
  for (const GridAxis& axis : spec.grid) {
    std::string values;
    for (const json& v : axis.values) values += (values.empty() ? "" : ", ") + value_label(v);
    grid += (grid.empty() ? "" : "; ") + axis.key + " = " + values;
  }
  std::string set;
  for (const std::string& o : spec.set) set += (set.empty() ? "" : ", ") + o;
  std::string h = "<header>\n<h1>sweep " + xml_escape(out.filename().string()) + "</h1>\n";
  h += "<p class=\"meta\">config <code>" + xml_escape(spec.config) + "</code>" +
       (spec.source.empty() ? "" : " from sweep file <code>" + xml_escape(spec.source) + "</code>") +
       "</p>\n";
  h += "<p class=\"meta\">grid: " + xml_escape(grid) + "</p>\n";
  if (!set.empty()) h += "<p class=\"meta\">set for every point: <code>" + xml_escape(set) + "</code></p>\n";
  h += "<p class=\"meta\">" + std::to_string(s.rows.size()) + " points: " + xml_escape(counts) +
       "; metric <code>" + xml_escape(s.metric) + "</code>, x axis <code>" + xml_escape(s.group_by) +
       "</code></p>\n</header>\n";
  return h;
}

std::string groups_table(const SweepSummary& s) {
  std::vector<std::string> keys;
  for (const std::string& k : s.grid_keys) {
    if (k != kSeedKey) keys.push_back(k);
  }
  std::string t = "<div class=\"box\"><h3>Groups: " + xml_escape(s.metric) +
                  " mean \u00b1 std over seeds</h3><table id=\"groups\">\n<tr>";
  for (const std::string& k : keys) t += "<th>" + xml_escape(k) + "</th>";
  t += "<th>n</th><th>" + xml_escape(s.metric) + "</th><th>seeds</th></tr>\n";
  for (const SummaryGroup& g : s.groups) {
    t += "<tr>";
    for (const auto& [key, value] : g.values) t += "<td>" + xml_escape(value_label(value)) + "</td>";
    const auto n = g.count.find(s.metric);
    std::string seeds;
    for (size_t r : g.rows) {
      for (const auto& [key, value] : s.rows[r].values) {
        if (key == kSeedKey) seeds += (seeds.empty() ? "" : ", ") + value_label(value);
      }
    }
    t += "<td class=\"num\">" + std::to_string(n == g.count.end() ? 0 : n->second) +
         "</td><td class=\"num\">" + xml_escape(mean_std(g, s.metric)) + "</td><td>" +
         xml_escape(seeds.empty() ? "\u2014" : seeds) + "</td></tr>\n";
  }
  return t + "</table></div>\n";
}

std::string points_table(const SweepSummary& s, const fs::path& out) {
  std::string t = "<div class=\"box\"><h3>Points</h3><table id=\"points\">\n<tr><th>point</th>";
  for (const std::string& k : s.grid_keys) t += "<th>" + xml_escape(k) + "</th>";
  t += "<th>state</th><th>" + xml_escape(s.metric) + "</th><th>run</th><th>error</th></tr>\n";
  for (const SummaryRow& row : s.rows) {
    t += "<tr><td><code>" + xml_escape(row.point) + "</code></td>";
    for (const auto& [key, value] : row.values) t += "<td>" + xml_escape(value_label(value)) + "</td>";
    const std::string state_class = row.state == "failed" ? " class=\"fail\"" : "";
    t += "<td" + state_class + ">" + xml_escape(row.state) + "</td>" + field_cell(row.fields, s.metric) +
         "<td>" + point_link(row, out) + "</td><td>" + xml_escape(row.error) + "</td></tr>\n";
  }
  return t + "</table></div>\n";
}

std::string all_fields_table(const SweepSummary& s) {
  std::string t =
      "<details><summary>Every numeric field of results.json (" + std::to_string(s.columns.size()) +
      " columns, also in summary.csv)</summary>\n<div class=\"scroll box\"><table id=\"fields\">\n<tr>"
      "<th>point</th>";
  for (const std::string& c : s.columns) t += "<th>" + xml_escape(c) + "</th>";
  t += "</tr>\n";
  for (const SummaryRow& row : s.rows) {
    t += "<tr><td><code>" + xml_escape(row.point) + "</code></td>";
    for (const std::string& c : s.columns) t += field_cell(row.fields, c);
    t += "</tr>\n";
  }
  return t + "</table></div></details>\n";
}

}  // namespace

std::string render_sweep_page(const SweepSummary& s, const SweepSpec& spec, const fs::path& out) {
  std::string page = page_start("causal sweep: " + out.filename().string());
  page += sweep_header(s, spec, out);
  page += "<section id=\"chart\"><h2>" + xml_escape(s.metric) + "</h2>\n";
  const bool any = std::any_of(s.rows.begin(), s.rows.end(),
                               [&](const SummaryRow& r) { return r.fields.count(s.metric); });
  if (!any) {
    page += "<p class=\"note\">" +
            xml_escape(s.metric.empty()
                           ? "No point has finished yet."
                           : "No finished point has the field " + s.metric + " in its results.json.") +
            "</p>\n";
  }
  page += "<div class=\"card\">\n" + metric_chart(s) + "</div>\n</section>\n";
  page += "<section id=\"tables\"><h2>Tables</h2>\n<div class=\"cols\">\n" + groups_table(s) + "</div>\n";
  page += points_table(s, out) + all_fields_table(s) + "</section>\n";
  page += page_end((out / "summary.json").string());
  return page;
}

std::string write_sweep_page(const SweepSummary& s, const SweepSpec& spec, const fs::path& out) {
  const std::string page = render_sweep_page(s, spec, out);
  const fs::path target = out / "summary.html";
  io_as<RunFolderError>([&] { write_file_atomically(target, page); });
  return target.string();
}

}  // namespace causal
