// `causal sweep` end to end from a sweep file: summary.csv and summary.json hold exactly each point's
// results.json figures, summary.html is self-contained, links every point's report and renders in
// headless Chromium with its tables and chart.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "review/svg_chart.h"
#include "support/browser.h"
#include "support/cli.h"
#include "support/html_checks.h"
#include "support/scratch_dir.h"
#include "support/skip.h"
#include "sweep/sweep_summary.h"

using namespace causal;
using causal::testing::slurp;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Splits one CSV line (fields quoted with "" as written by summary_csv).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out{""};
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The four points of the tiny sweep, in the order the summaries list them.
const std::vector<std::string> kPointNames{"position=none,seed=1", "position=none,seed=2",
                                           "position=rope,seed=1", "position=rope,seed=2"};

// Runs the tiny sweep (position none/rope x seeds 1, 2) from a sweep file in `dir`; returns the sweep file.
fs::path run_tiny_sweep(const fs::path& dir, const fs::path& out) {
  fs::create_directories(dir / "sweeps");
  const fs::path file = dir / "sweeps" / "tiny.json";
  std::ofstream(file) << R"({"config": ")" << CAUSAL_SOURCE_DIR << R"(/configs/retrieval.json",
    "grid": {"model.position": ["none", "rope"], "seed": [1, 2]},
    "set": {"train.steps": 8, "data.train_examples": 256, "data.test_examples": 64},
    "metric": "test_accuracy", "out": ")"
                      << out.string() << R"("})";
  const testing::Result r = testing::run_causal("sweep --sweep " + file.string() + " --jobs 2");
  CATCH_INFO(r.out << r.err);
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK(r.out.find("model.position=rope") != std::string::npos);  // the groups' table at the end
  return file;
}

}  // namespace

CATCH_TEST_CASE("sweep from a sweep file: summaries equal the points' results, the page is self-contained",
                "[e2e][sweep][report]") {
  testing::ScratchDir dir("sweep_page");
  const fs::path out = dir.path / "out";
  const fs::path file = run_tiny_sweep(dir.path, out);

  // summary.json: one row per point, every numeric field of its results.json, exactly.
  const json summary = json::parse(slurp(out / "summary.json"));
  CATCH_CHECK(summary["metric"] == "test_accuracy");
  CATCH_CHECK(summary["group_by"] == "model.position");
  CATCH_REQUIRE(summary["rows"].size() == 4);
  const std::vector<std::string>& names = kPointNames;
  std::vector<std::map<std::string, double>> expected;
  for (size_t i = 0; i < names.size(); ++i) {
    const json& row = summary["rows"][i];
    CATCH_CHECK(row["point"] == names[i]);
    CATCH_CHECK(row["state"] == "finished");
    const json results = json::parse(slurp(out / names[i] / "results.json"));
    const std::map<std::string, double> fields = flatten_numbers(results);
    CATCH_REQUIRE(fields.count("test_accuracy"));
    CATCH_REQUIRE(fields.size() > 5);
    for (const auto& [field, value] : fields) {
      CATCH_INFO(names[i] << " " << field);
      CATCH_CHECK(row[field].get<double>() == value);  // bit-for-bit: JSON numbers round-trip
    }
    CATCH_CHECK(row["model.position"] == (i < 2 ? "none" : "rope"));
    CATCH_CHECK(row["seed"] == static_cast<int>(i % 2 + 1));
    expected.push_back(fields);
  }
  // Groups: mean and sample std of the two seeds.
  for (size_t g = 0; g < 2; ++g) {
    const double a = expected[2 * g].at("test_accuracy"), b = expected[2 * g + 1].at("test_accuracy");
    const json& stats = summary["groups"][g]["fields"]["test_accuracy"];
    CATCH_CHECK(stats["n"] == 2);
    CATCH_CHECK(stats["mean"].get<double>() == Approx((a + b) / 2));
    CATCH_CHECK(stats["std"].get<double>() == Approx(std::fabs(a - b) / std::sqrt(2.0)).margin(1e-12));
  }

  // summary.csv: the same figures.
  std::istringstream csv(slurp(out / "summary.csv"));
  std::string line;
  std::getline(csv, line);
  const std::vector<std::string> header = csv_fields(line);
  CATCH_CHECK(header[0] == "point");
  CATCH_CHECK(header[2] == "model.position");
  CATCH_CHECK(header[3] == "seed");
  for (size_t i = 0; i < names.size(); ++i) {
    CATCH_REQUIRE(std::getline(csv, line));
    const std::vector<std::string> fields = csv_fields(line);
    CATCH_REQUIRE(fields.size() == header.size());
    CATCH_CHECK(fields[0] == names[i]);
    size_t compared = 0;
    for (size_t c = 4; c + 1 < header.size(); ++c) {
      CATCH_INFO(names[i] << " " << header[c]);
      CATCH_REQUIRE(expected[i].count(header[c]));
      CATCH_CHECK(std::stod(fields[c]) == expected[i].at(header[c]));
      ++compared;
    }
    CATCH_CHECK(compared == expected[i].size());
  }
  CATCH_CHECK(!std::getline(csv, line));

  // summary.html: self-contained, every point linked to its report.
  const std::string html = slurp(out / "summary.html");
  testing::check_self_contained(html);
  for (const std::string& name : names) {
    CATCH_CHECK(fs::exists(out / name / "report.html"));
    CATCH_CHECK(html.find("href=\"" + name + "/report.html\"") != std::string::npos);
  }
  size_t spread = 0;  // a whisker for each group whose seeds differ
  for (const json& g : summary["groups"])
    spread += g["fields"]["test_accuracy"]["std"].get<double>() > 0 ? 1 : 0;
  CATCH_CHECK(testing::count_of(html, "class=\"whisker\"") == spread);
  CATCH_CHECK(html.find(">none</text>") != std::string::npos);  // categories on the x axis
  CATCH_CHECK(html.find(">rope</text>") != std::string::npos);
  const json sweep = json::parse(slurp(out / "sweep.json"));
  CATCH_CHECK(sweep["sweep_file"] == file.string());
}

// Its own case so that a missing Chromium skips only the browser's checks: a skip printed after the other
// checks would make CTest report them skipped even when they failed (support/skip.h).
CATCH_TEST_CASE("sweep summary page renders in headless Chromium with its tables and chart",
                "[e2e][sweep][report]") {
  const std::string chromium = testing::find_chromium();
  if (chromium.empty()) CAUSAL_SKIP_TEST("chromium not installed");
  testing::ScratchDir dir("sweep_page_render");
  const fs::path out = dir.path / "out";
  run_tiny_sweep(dir.path, out);
  const json summary = json::parse(slurp(out / "summary.json"));
  const std::vector<std::string>& names = kPointNames;
  testing::check_renders(chromium, out / "summary.html", dir.path / "summary.png");
  // What the browser parsed: both tables with their rows, the mean figures, the chart's marks.
  const std::string dom = testing::dump_dom(chromium, out / "summary.html", dir.path);
  CATCH_CHECK(dom.find("<table id=\"groups\">") != std::string::npos);
  CATCH_CHECK(dom.find("<table id=\"points\">") != std::string::npos);
  for (const std::string& name : names)
    CATCH_CHECK(dom.find("<code>" + name + "</code>") != std::string::npos);
  CATCH_CHECK(testing::count_of(dom, "<circle") >= 4 + 2);  // a ring per seed and a mean per group
  for (size_t g = 0; g < 2; ++g) {
    const double mean = summary["groups"][g]["fields"]["test_accuracy"]["mean"].get<double>();
    CATCH_CHECK(dom.find(svg::format_number(mean)) != std::string::npos);
  }
}
