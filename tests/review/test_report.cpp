// The run report: the SVG writer's edge cases, report pages of hand-made run folders (torn metrics,
// resumed runs, missing checkpoints) and of real trained runs, and a headless-browser render when Chromium
// is installed.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "config/config_io.h"
#include "review/report.h"
#include "review/run_history.h"
#include "review/svg_chart.h"
#include "run/run_folder.h"
#include "run/train_run.h"
#include "support/browser.h"
#include "support/byte_docs.h"
#include "support/cli.h"
#include "support/html_checks.h"
#include "support/skip.h"

using namespace causal;
using causal::testing::check_renders;
using causal::testing::check_self_contained;
using causal::testing::find_chromium;
using causal::testing::slurp;
using causal::testing::tag_balance_problem;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

// Every coordinate attribute and path command number parses as a finite number. Returns "" or the problem.
std::string number_problem(const std::string& svg) {
  static const std::regex attribute(R"re(\s(x|y|x1|x2|y1|y2|cx|cy|r|width|height)="([^"]*)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), attribute); it != std::sregex_iterator();
       ++it) {
    const std::string value = (*it)[2];
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(v)) return (*it)[1].str() + "=\"" + value + "\"";
  }
  static const std::regex path(R"re(\sd="([^"]*)")re");
  static const std::regex token(R"([-+]?[0-9.]+(e[-+]?[0-9]+)?|[A-Za-z])");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator(); ++it) {
    const std::string d = (*it)[1];
    if (d.find("nan") != std::string::npos || d.find("inf") != std::string::npos) return "d=\"" + d + "\"";
  }
  for (const char* bad : {"nan", "inf"}) {
    // Numbers are attribute values or tick text; neither may spell a non-finite value.
    if (svg.find("=\"" + std::string(bad)) != std::string::npos ||
        svg.find(">" + std::string(bad) + "<") != std::string::npos ||
        svg.find("=\"-" + std::string(bad)) != std::string::npos) {
      return std::string("a value spelled ") + bad;
    }
  }
  return "";
}

void check_well_formed_svg(const std::string& svg) {
  CATCH_CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CATCH_CHECK(tag_balance_problem(svg) == "");
  CATCH_CHECK(number_problem(svg) == "");
}

svg::Series points(const std::string& name, std::vector<double> x, std::vector<double> y,
                   svg::SeriesStyle style = svg::SeriesStyle::kLine) {
  svg::Series s;
  s.name = name;
  s.x = std::move(x);
  s.y = std::move(y);
  s.style = style;
  return s;
}

svg::LineChart chart_of(std::vector<svg::Series> series, bool log_y = false) {
  svg::LineChart c;
  c.title = "t <&> \"q\"";
  c.x_label = "step";
  c.y_label = "value";
  c.log_y = log_y;
  c.series = std::move(series);
  return c;
}

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("causal_report_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A retrieval run of the bundled config, short; stop_at > 0 stops (with a checkpoint) after that step.
nlohmann::json train_retrieval(const fs::path& run, int64_t steps, int64_t stop_at = 0) {
  const RunConfig config =
      load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json",
                  {"train.steps=" + std::to_string(steps), "train.log_every=5", "train.eval_every=20"});
  TrainRequest request;
  request.start.run_dir = run.string();
  request.print_table = false;
  request.stop_at_step = stop_at;
  return train_run(config, request).results;
}

// A tiny byte-level text run (2 layers x 4 heads, seq_len 24) on generated documents in `dir`.
fs::path train_text(const fs::path& dir, int64_t steps) {
  std::vector<std::string> docs;
  for (int i = 0; i < 30; ++i) docs.push_back("the cat " + std::to_string(i) + " sat on the mat.\tok ");
  causal::testing::write_byte_docs((dir / "train.tok").string(), docs);
  causal::testing::write_byte_docs((dir / "val.tok").string(), {docs.begin(), docs.begin() + 5});
  const std::string text = R"({"name": "report-text", "threads": 1,
    "model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259, "d_model": 32, "n_layers": 2,
              "n_heads": 4, "n_kv_heads": 2, "position": "rope", "max_seq_len": 24, "ffn": "swiglu",
              "norm": "rmsnorm", "bias": false, "tie_embeddings": true},
    "data": {"kind": "text", "train": ")" +
                           (dir / "train.tok").string() + R"(", "val": ")" + (dir / "val.tok").string() +
                           R"(", "seq_len": 24},
    "train": {"steps": )" + std::to_string(steps) +
                           R"(, "batch_size": 4, "log_every": 1, "eval_every": 4,
              "optimizer": {"lr": 0.01}}})";
  const RunConfig config = parse_config_text(text, "report-text.json");
  TrainRequest request;
  request.start.run_dir = (dir / "run").string();
  request.print_table = false;
  train_run(config, request);
  return dir / "run";
}

}  // namespace

CATCH_TEST_CASE("svg line charts are well-formed for ordinary, single-point, constant and empty series",
                "[unit][report]") {
  const std::vector<svg::LineChart> charts{
      chart_of({points("a", {1, 2, 3, 4}, {0.5, 0.25, 0.125, 0.1}), points("b", {2, 4}, {0.4, 0.2})}),
      chart_of({points("a", {1, 2, 3, 4}, {0.5, 0.25, 0.125, 0.1})}, /*log_y=*/true),
      chart_of({points("one", {7}, {3.0})}),
      chart_of({points("one", {7}, {3.0})}, true),
      chart_of({points("flat", {1, 2, 3}, {2.0, 2.0, 2.0})}),
      chart_of({points("zero", {1, 2, 3}, {0.0, 0.0, 0.0})}),
      chart_of({points("flat", {1, 2, 3}, {1e-7, 1e-7, 1e-7})}, true),
      chart_of({}),
      chart_of({points("empty", {}, {})}, true),
      chart_of({points("huge", {1, 1e6}, {1e30, -1e30})}),
  };
  for (const svg::LineChart& c : charts) {
    const std::string s = svg::render_line_chart(c);
    CATCH_INFO(s);
    check_well_formed_svg(s);
    CATCH_CHECK(s.find("t &lt;&amp;&gt; &quot;q&quot;") != std::string::npos);  // the title, escaped
  }
  // A lone point of a line series is still visible (a dot); an empty chart says so.
  CATCH_CHECK(count_of(svg::render_line_chart(chart_of({points("", {7}, {3.0})})), "<circle") == 1);
  CATCH_CHECK(svg::render_line_chart(chart_of({})).find("no data") != std::string::npos);
  // Reference lines outside the data range are left out rather than stretching the axis.
  svg::LineChart with_lines = chart_of({points("a", {1, 2}, {1.0, 2.0})});
  with_lines.y_lines = {{1.5, "inside"}, {50.0, "outside"}};
  with_lines.x_lines = {{1.5, "resumed"}, {kNaN, "nan"}};
  const std::string s = svg::render_line_chart(with_lines);
  check_well_formed_svg(s);
  CATCH_CHECK(s.find("inside") != std::string::npos);
  CATCH_CHECK(s.find("outside") == std::string::npos);
  CATCH_CHECK(s.find("resumed") != std::string::npos);
  // Forced ranges widen the axes: one point at 0.5 on a 0..1 axis from step 0 to 100.
  svg::LineChart ranged = chart_of({points("a", {50}, {0.5})});
  ranged.x_min = 0;
  ranged.x_max = 100;
  ranged.y_min = 0;
  ranged.y_max = 1;
  const std::string r = svg::render_line_chart(ranged);
  check_well_formed_svg(r);
  for (const char* tick : {">0</text>", ">1</text>", ">100</text>"})
    CATCH_CHECK(r.find(tick) != std::string::npos);
}

CATCH_TEST_CASE("svg line charts skip NaN, inf and, on a log axis, non-positive values", "[unit][report]") {
  // Unnamed marker series: no legend entry, so every <circle> is a drawn point.
  const std::vector<double> x{1, 2, 3, 4, 5, 6, kNaN, 8};
  const std::vector<double> y{1.0, kNaN, kInf, -1.0, 0.0, 10.0, 5.0, -kInf};
  const std::string linear = svg::render_line_chart(chart_of({points("", x, y, svg::SeriesStyle::kMarkers)}));
  check_well_formed_svg(linear);
  CATCH_CHECK(count_of(linear, "<circle") == 4);  // 1, -1, 0, 10
  const std::string log =
      svg::render_line_chart(chart_of({points("", x, y, svg::SeriesStyle::kMarkers)}, true));
  check_well_formed_svg(log);
  CATCH_CHECK(count_of(log, "<circle") == 2);  // 1 and 10
  // Only non-drawable values on a log axis: an empty chart, not a broken one.
  const std::string none =
      svg::render_line_chart(chart_of({points("", {1, 2}, {0.0, -3.0}, svg::SeriesStyle::kMarkers)}, true));
  check_well_formed_svg(none);
  CATCH_CHECK(count_of(none, "<circle") == 0);
  CATCH_CHECK(none.find("no data") != std::string::npos);
  // A line breaks at a gap: two "M" (move) commands for 1,2 | 4,5.
  const std::string gap =
      svg::render_line_chart(chart_of({points("", {1, 2, 3, 4, 5}, {1.0, 2.0, kNaN, 3.0, 4.0})}));
  check_well_formed_svg(gap);
  const size_t d = gap.find(" d=\"");
  CATCH_REQUIRE(d != std::string::npos);
  const std::string path = gap.substr(d, gap.find('"', d + 4) - d);
  CATCH_CHECK(count_of(path, "M") == 2);
  CATCH_CHECK(count_of(path, "L") == 2);
}

CATCH_TEST_CASE("svg ticks and number formatting", "[unit][report]") {
  const auto unit = svg::linear_ticks(0, 1, 5);
  CATCH_REQUIRE(unit.size() == 6);
  for (size_t i = 0; i < unit.size(); ++i)
    CATCH_CHECK(unit[i] == Catch::Detail::Approx(0.2 * static_cast<double>(i)).margin(1e-12));
  const auto ticks = svg::linear_ticks(1, 320, 5);
  CATCH_CHECK(ticks == std::vector<double>{100, 200, 300});
  CATCH_CHECK(svg::linear_ticks(3, 3) == std::vector<double>{3});
  CATCH_CHECK(svg::log_ticks(1e-3, 10) == std::vector<double>{1e-3, 1e-2, 1e-1, 1, 10});
  CATCH_CHECK(svg::log_ticks(1, 10) == std::vector<double>{1, 2, 5, 10});
  CATCH_CHECK(svg::log_ticks(1e-30, 1).size() <= 9);
  CATCH_CHECK(svg::log_ticks(0, 1).empty());
  CATCH_CHECK(svg::format_number(0) == "0");
  CATCH_CHECK(svg::format_number(0.25) == "0.25");
  CATCH_CHECK(svg::format_number(1500) == "1500");
  CATCH_CHECK(svg::format_number(22904.2) == "22.9k");
  CATCH_CHECK(svg::format_number(2.5e6) == "2.5M");
  CATCH_CHECK(svg::format_number(1.2e-5) == "1.2e-5");
  CATCH_CHECK(svg::format_number(1e-8) == "1e-8");
  CATCH_CHECK(svg::format_number(-3e-4) == "-3e-4");
  CATCH_CHECK(svg::format_number(kNaN) == "nan");
  CATCH_CHECK(svg::xml_escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#39;");
}

CATCH_TEST_CASE("svg heatmaps draw shown cells only and escape their labels", "[unit][report]") {
  svg::Heatmap map;
  map.title = "layer 0 \u00b7 head 0";
  map.row_labels = {"<", "&", "x"};
  map.col_labels = map.row_labels;
  // Causal: 6 shown cells of 9, one of them NaN (not drawn either).
  map.values = {1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.2, kNaN, 0.5};
  map.shown = {true, false, false, true, true, false, true, true, true};
  const std::string s = svg::render_heatmap(map);
  check_well_formed_svg(s);
  CATCH_CHECK(count_of(s, "<rect") == 5 + 2);  // 5 cells + background + frame
  CATCH_CHECK(s.find(">&lt;</text>") != std::string::npos);
  CATCH_CHECK(s.find(">&amp;</text>") != std::string::npos);
  map.cell_titles = true;
  check_well_formed_svg(svg::render_heatmap(map));
  check_well_formed_svg(svg::render_color_bar(0, 1, 260, "attention weight"));
}

CATCH_TEST_CASE(
    "report of a hand-written run folder: torn last line, resumed run, optional fields, no checkpoint",
    "[unit][report]") {
  const fs::path dir = fresh_dir("handmade");
  write_file(dir / "config.json", R"({"name": "hand <made>", "seed": 0, "device": "cpu", "threads": 1,
    "model": {"d_model": 32, "n_layers": 2, "n_heads": 4, "position": "rope", "ffn": "swiglu", "norm": "rmsnorm"},
    "data": {"kind": "text", "train": "a.tok", "val": "b.tok", "seq_len": 16},
    "train": {"steps": 100, "batch_size": 4, "grad_clip": 1.0}})");
  // Steps 1..40, then a resumed process (elapsed restarts) re-logging from 30, and a torn last line.
  std::string metrics;
  auto row = [](int step, double elapsed, bool spike) {
    nlohmann::json r = {{"kind", "train"},
                        {"step", step},
                        {"loss", 3.0 / step},
                        {"lr", 1e-3},
                        {"grad_norm", 0.5 + step % 7 * 0.2},
                        {"clipped", step % 7 > 2},
                        {"tokens_per_s", 1000.0 + step},
                        {"elapsed", elapsed},
                        {"max_abs_logit", 2.0},
                        {"act_rms", {0.5, 0.6}},
                        {"spike", spike}};
    if (step % 10 == 0) {
      r["layer_grad_norm"] = {0.1, 0.2};
      r["update_ratio"] = {1e-3, 2e-3};
      r["embed_grad_norm"] = 0.05;
    }
    if (step == 15) r["loss"] = nullptr;  // a non-finite loss is logged as null
    return r.dump() + "\n";
  };
  for (int s = 1; s <= 40; s += 1) metrics += row(s, s * 0.1, s == 12);
  metrics += R"({"kind":"eval","step":20,"val_loss":1.5,"val_bits_per_byte":2.1})"
             "\n";
  for (int s = 30; s <= 50; s += 1) metrics += row(s, (s - 29) * 0.1, false);
  // train.eval_tasks: a benchmark's figures in a later eval row (its chart starts there).
  metrics +=
      R"({"kind":"eval","step":50,"val_loss":1.2,"bench/tiny-cloze/acc":0.4,"bench/tiny-cloze/acc_norm":0.45,)"
      R"("bench/tiny-cloze/chance":0.25,"bench/tiny-cloze/items":80})"
      "\n";
  metrics += R"({"kind":"train","step":51,"loss":0.0)";  // torn: the writer is mid-line
  write_file(dir / "metrics.jsonl", metrics);

  const RunHistory h = read_run_history(dir);
  CATCH_CHECK(h.train_rows.size() == 50);
  CATCH_CHECK(h.eval_rows.size() == 2);
  CATCH_CHECK(h.skipped_lines == 1);
  CATCH_CHECK(h.restarts == std::vector<int64_t>{30});
  CATCH_CHECK(h.last_step() == 50);
  CATCH_CHECK(list_field_points(h.train_rows, "layer_grad_norm").size() == 2);
  CATCH_CHECK(list_field_points(h.train_rows, "layer_grad_norm")[0].size() == 5);
  CATCH_CHECK(std::isnan(field_points(h.train_rows, "loss")[14].second));

  const std::string html = render_report(dir.string());
  check_self_contained(html);
  for (const char* expected :
       {"hand &lt;made&gt;", "unfinished", "resumed 1 time", "unreadable line", "Gradient norm per block",
        "Update / weight ratio per block", "Activation RMS per block", "1 step(s) flagged as spikes",
        "No attention heatmap", "no checkpoint", "validation loss (eval)", "No results.json yet",
        "Benchmarks (eval rows)", "tiny-cloze acc_norm", "tiny-cloze acc", "chance 0.25"}) {
    CATCH_INFO(expected);
    CATCH_CHECK(html.find(expected) != std::string::npos);
  }
  CATCH_CHECK(html.find("Retrieval controls") == std::string::npos);
  CATCH_CHECK(count_of(html, "class=\"chart\"") >= 8);
  // The tables read the config's typed fields, resolved: n_kv_heads, absent from the file, is n_heads.
  for (const char* cells :
       {"<th>n_heads / n_kv_heads</th><td>4 / 4</td>", "<th>ffn</th><td>swiglu (hidden 88)</td>",
        "<th>steps</th><td>100</td>", "<th>grad_clip</th><td>1</td>"}) {
    CATCH_INFO(cells);
    CATCH_CHECK(html.find(cells) != std::string::npos);
  }

  // A retrieval folder with results: the controls table judges each figure against the lab's thresholds.
  const fs::path r = fresh_dir("handmade_retrieval");
  write_file(r / "config.json", R"({"name": "r", "data": {"kind": "retrieval", "pairs": 4, "value_count": 8},
    "train": {"steps": 10, "grad_clip": 0.0}})");
  write_file(r / "results.json", R"({"initial_loss": 2.0, "test_loss": 0.4, "test_accuracy": 0.95,
    "no_context_accuracy": 0.3, "intervention_accuracy": 0.9, "causality_max_diff": 0.0, "steps": 10,
    "by_evidence_position": {"0": {"count": 3, "accuracy": 1.0}, "10": {"count": 1, "accuracy": 0.0},
                             "2": {"count": 2, "accuracy": 0.5}},
    "by_distractors": {"0": {"count": 6, "accuracy": 0.8}},
    "by_pairs": {"4": {"count": 6, "accuracy": 0.8, "loss": 0.4}, "8": {"count": 6, "accuracy": 0.5, "loss": 1.0}}})");
  const std::string page = render_report(r.string());
  check_self_contained(page);
  CATCH_CHECK(page.find("Retrieval controls") != std::string::npos);
  CATCH_CHECK(page.find("Benchmarks (eval rows)") == std::string::npos);
  CATCH_CHECK(count_of(page, ">PASS<") == 4);  // loss 0.4 < 0.5, accuracy, intervention, causality
  CATCH_CHECK(count_of(page, ">FAIL<") == 1);  // no-context 0.3
  CATCH_CHECK(page.find("4 (trained)") != std::string::npos);
  CATCH_CHECK(page.find("metrics.jsonl holds no rows yet") != std::string::npos);
  // Breakdown keys sort numerically: 0, 2, 10.
  const size_t two = page.find("<td>2</td><td class=\"num\">2<"),
               ten = page.find("<td>10</td><td class=\"num\">1<");
  CATCH_CHECK(two != std::string::npos);
  CATCH_CHECK(ten != std::string::npos);
  CATCH_CHECK(two < ten);
  fs::remove_all(dir);
  fs::remove_all(r);
}

// Every figure eval recorded is shown beside the adapters behind it, on the page and in the text summary:
// another run's adapters (label and digest prefix), the base alone, a whole model as it is, a record from
// before adapters were named, and a LoRA run's own training row; a half-written record is skipped.
CATCH_TEST_CASE("report: each evaluation names the adapters behind its figures", "[unit][report][adapter]") {
  const fs::path dir = fresh_dir("adapters");
  write_file(dir / "config.json",
             R"({"name": "tune", "data": {"kind": "text", "train": "a.tok", "val": "b.tok"},
    "train": {"steps": 10, "lora": {"rank": 4}}})");
  write_file(dir / "metrics.jsonl", R"({"kind":"eval","step":10,"val_loss":1.75,"val_perplexity":5.75})"
                                    "\n");
  const std::string sha = "abcdef0123456789" + std::string(48, '0');
  write_file(dir / "eval" / "step_00000010.val-11111111.json",
             R"({"step": 10, "split": "val", "loss": 1.25, "perplexity": 3.5,
      "adapter": {"label": "runs/tuneA@step7", "checkpoint": "/r/tuneA/checkpoints/step_00000007", "step": 7,
                  "sha256": ")" +
                 sha + R"(", "base": "/r/base/checkpoints/step_00000006", "base_sha256": "ff"}})");
  write_file(dir / "eval" / "step_00000010.val-22222222.json",
             R"j({"step": 10, "split": "val", "loss": 2.5,
      "adapter": {"label": "none (base)", "checkpoint": null, "base": "/r/base/checkpoints/step_00000006"}})j");
  write_file(dir / "eval" / "step_00000010.tasks-33333333.json",
             R"({"step": 10, "benchmarks": {"tiny": {"acc": 0.5, "acc_norm": 0.25}}, "adapter": null})");
  write_file(dir / "eval" / "step_00000004.json", R"({"step": 4, "split": "val", "loss": 3.0})");
  write_file(dir / "eval" / "step_00000011.json", R"({"step": 11, "split": "va)");  // being written

  const std::string html = render_report(dir.string());
  check_self_contained(html);
  const std::string text = render_summary(dir.string());
  for (const std::string& expected :
       {std::string("runs/tuneA@step7"), std::string("abcdef012345"), std::string("none (base)"),
        std::string("whole model"), std::string("(not recorded)"), std::string("loss 1.25"),
        std::string("tiny acc 0.5"), std::string("tiny acc_norm 0.25"), std::string("loss 1.75"),
        dir.string() + "@step10", std::string("step_00000010.val-22222222.json")}) {
    CATCH_INFO(expected);
    CATCH_CHECK(html.find(expected) != std::string::npos);
    CATCH_CHECK(text.find(expected) != std::string::npos);
  }
  CATCH_CHECK(html.find("step_00000011") == std::string::npos);
  CATCH_CHECK(html.find("validation loss (eval, adapters of this run)") != std::string::npos);
  // One line per record (4 files and the training row) under a heading, oldest step first.
  CATCH_CHECK(count_of(text, "\n") == 6);
  CATCH_CHECK(text.find("step_00000004.json") < text.find("step_00000010"));
  // A row's figures sit beside its own adapters: the base alone scored 2.5, tuneA's adapters 1.25.
  const auto row_of = [&](const std::string& needle) {
    const size_t at = html.find(needle);
    return at == std::string::npos
               ? std::string()
               : html.substr(html.rfind("<tr>", at), html.find("</tr>", at) - html.rfind("<tr>", at));
  };
  CATCH_CHECK(row_of("<code>none (base)</code></td>").find("loss 2.5") != std::string::npos);
  CATCH_CHECK(row_of("<code>runs/tuneA@step7</code></td>").find("loss 1.25") != std::string::npos);

  // A run with no evaluation says so, and prints nothing.
  const fs::path empty = fresh_dir("adapters_none");
  write_file(empty / "config.json", R"({"name": "e"})");
  CATCH_CHECK(render_report(empty.string()).find("No evaluation yet") != std::string::npos);
  CATCH_CHECK(render_summary(empty.string()).empty());
  fs::remove_all(dir);
  fs::remove_all(empty);
}

// A config.json this build cannot read (another version's key) still gets its page: curves, no config
// tables, and a note naming the key.
CATCH_TEST_CASE("report of a run whose config.json this build does not read", "[unit][report]") {
  const fs::path dir = fresh_dir("foreign_config");
  write_file(dir / "config.json", R"({"name": "old", "model": {"d_model": 32, "n_heads": 4, "old_knob": 1},
    "data": {"kind": "text"}})");
  write_file(dir / "metrics.jsonl", R"({"kind":"train","step":1,"loss":2.0,"lr":0.001})"
                                    "\n");
  const RunHistory h = read_run_history(dir);
  CATCH_CHECK(!h.config.has_value());
  CATCH_CHECK_THAT(h.config_problem, Catch::Matchers::Contains("model.old_knob"));
  const std::string html = render_report(dir.string());
  check_self_contained(html);
  CATCH_CHECK(html.find("does not read as a config of this build") != std::string::npos);
  CATCH_CHECK(html.find("model.old_knob") != std::string::npos);
  CATCH_CHECK(html.find("<h3>Model</h3>") == std::string::npos);
  CATCH_CHECK(html.find("Training curves") != std::string::npos);
  fs::remove_all(dir);
}

CATCH_TEST_CASE("report of a missing run folder or config.json is a RunFolderError naming it",
                "[unit][report]") {
  const fs::path dir = fresh_dir("missing");
  CATCH_CHECK_THROWS_WITH(write_report((dir / "nope").string()), Catch::Matchers::Contains("nope"));
  CATCH_CHECK_THROWS_AS(write_report((dir / "nope").string()), RunFolderError);
  CATCH_CHECK_THROWS_WITH(write_report(dir.string()), Catch::Matchers::Contains("config.json"));
  CATCH_CHECK_THROWS_AS(write_report(dir.string()), RunFolderError);
  write_file(dir / "config.json", "{\"name\": ");
  CATCH_CHECK_THROWS_AS(write_report(dir.string()), RunFolderError);
  CATCH_CHECK(!fs::exists(dir / "report.html"));
  fs::remove_all(dir);
}

// A report that cannot be written is the run folder's error (exit 2), not an unexpected failure (exit 1).
CATCH_TEST_CASE("a report.html that cannot be replaced is a RunFolderError", "[unit][report]") {
  const fs::path dir = fresh_dir("unwritable");
  write_file(dir / "config.json", R"({"name": "x", "seed": 0, "device": "cpu", "threads": 1,
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 4},
    "data": {"kind": "text", "train": "a.tok", "val": "b.tok", "seq_len": 16},
    "train": {"steps": 10, "batch_size": 4}})");
  fs::create_directories(dir / "report.html" / "in-the-way");
  CATCH_CHECK_THROWS_AS(write_report(dir.string()), RunFolderError);
  CATCH_CHECK(fs::is_directory(dir / "report.html" / "in-the-way"));
  fs::remove_all(dir);
}

CATCH_TEST_CASE("report of a retrieval run, interrupted, resumed and finished", "[e2e][report]") {
  const fs::path dir = fresh_dir("retrieval");
  const fs::path run = dir / "run";
  train_retrieval(run, 60, /*stop_at=*/30);

  // Interrupted after step 30: no results, controls from the step-20 eval row, heatmaps from step 30.
  const std::string path = write_report(run.string());
  CATCH_CHECK(path == (run / "report.html").string());
  std::string html = slurp(path);
  check_self_contained(html);
  for (const char* expected :
       {"unfinished", "latest eval row (step 20)", "Retrieval controls", "step 30)", "class=\"heatmap\""}) {
    CATCH_INFO(expected);
    CATCH_CHECK(html.find(expected) != std::string::npos);
  }

  train_retrieval(run, 60);  // continues from the step-30 checkpoint
  write_report(run.string());
  html = slurp(run / "report.html");
  check_self_contained(html);
  for (const char* expected :
       {"finished: results.json", "resumed 1 time", "From results.json", "By evidence position",
        "By distractors", "By pairs", "test loss (eval)", "Retrieval accuracy (eval rows)", "step 60)",
        "model answers v", ":?</text>"}) {
    CATCH_INFO(expected);
    CATCH_CHECK(html.find(expected) != std::string::npos);
  }
  CATCH_CHECK(count_of(html, ">PASS<") + count_of(html, ">FAIL<") == 5);
  CATCH_CHECK(count_of(html, "class=\"heatmap\"") == 4);  // 1 layer x 4 heads
  CATCH_CHECK(count_of(html, "class=\"chart\"") >= 6);
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const std::string svg = html.substr(at, html.find("</svg>", at) + 6 - at);
    CATCH_CHECK(number_problem(svg) == "");
  }
  // Whatever the writer names its temporary, none is left beside report.html.
  for (const auto& entry : fs::directory_iterator(run)) {
    CATCH_INFO(entry.path().filename().string());
    CATCH_CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
  }

  // A writer caught mid-line: the torn row is skipped and said so.
  std::ofstream(run / "metrics.jsonl", std::ios::app) << R"({"kind":"train","step":61,"lo)";
  html = slurp(write_report(run.string()));
  CATCH_CHECK(html.find("1 unreadable line(s)") != std::string::npos);
  fs::remove_all(dir);
}

CATCH_TEST_CASE("report of a text run shows byte tokens in its heatmaps", "[e2e][report]") {
  const fs::path dir = fresh_dir("text");
  const fs::path run = train_text(dir, 8);
  const std::string html = slurp(write_report(run.string()));
  check_self_contained(html);
  for (const char* expected : {"finished: results.json", "validation loss (eval)", "Validation bits per byte",
                               "first 24 positions of the first validation row", ">BOS</text>",
                               ">\u2423</text>", "Activation RMS per block", "block 1"}) {
    CATCH_INFO(expected);
    CATCH_CHECK(html.find(expected) != std::string::npos);
  }
  CATCH_CHECK(html.find("Retrieval controls") == std::string::npos);
  CATCH_CHECK(count_of(html, "class=\"heatmap\"") == 8);  // 2 layers x 4 query heads
  fs::remove_all(dir);
}

CATCH_TEST_CASE("report pages render in headless Chromium", "[e2e][report]") {
  const std::string chromium = find_chromium();
  if (chromium.empty()) CAUSAL_SKIP_TEST("chromium not installed");
  const fs::path dir = fresh_dir("render");
  train_retrieval(dir / "retrieval", 60);
  const fs::path text = train_text(dir, 8);
  check_renders(chromium, write_report((dir / "retrieval").string()), dir / "report-retrieval.png");
  check_renders(chromium, write_report(text.string()), dir / "report-text.png");
  fs::remove_all(dir);
}
