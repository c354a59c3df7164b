// Self-contained SVG for the run report: line charts (linear or log y, markers, reference lines) and
// heatmaps. Pure string building: no tensors, no files, no JavaScript.
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace causal::svg {

// How a series is drawn: a line through its points, markers only, or both.
enum class SeriesStyle { kLine, kMarkers, kLineMarkers };

struct Series {
  std::string name;          // legend text
  std::vector<double> x, y;  // same length; a non-finite x or y (or y <= 0 on a log axis) is skipped
  std::string color = "";    // CSS colour; "" = the palette colour of the series' index
  SeriesStyle style = SeriesStyle::kLine;
  double marker_radius = 3.0;  // px, for kMarkers / kLineMarkers
  bool hollow = false;         // markers drawn as rings (for subtle marks)
  bool dashed = false;         // dashed line
  double opacity = 1.0;
  int layer = 0;              // drawing order: lower layers first (ties keep series order); legend unaffected
  std::vector<double> y_err;  // when set (same length as y): a whisker from y - err to y + err per point
};

// A vertical line at x (e.g. where a run was resumed) or a horizontal one at y (e.g. the clip threshold).
struct RefLine {
  double at = 0.0;
  std::string label;
  std::string color = "#888";
};

struct LineChart {
  std::string title;
  std::string x_label;    // with its unit, e.g. "step"
  std::string y_label;    // with its unit, e.g. "loss (nats/token)"
  bool log_y = false;     // base-10 ticks; the y label should say so
  bool integer_x = true;  // x holds whole numbers (steps): only whole-number ticks
  int width = 600;        // px; the height grows with the legend
  int plot_height = 230;
  double x_min = NAN,
         x_max = NAN;  // when finite, the x axis covers them too (charts of one run share a range)
  double y_min = NAN, y_max = NAN;  // likewise for y (e.g. 0 and 1 for accuracies)
  std::vector<Series> series;
  std::vector<RefLine> x_lines, y_lines;
  // When set, x is a category index 0..n-1: one tick per category, labelled with its name.
  std::vector<std::string> x_categories;
};

// <svg>...</svg>. A chart with no drawable point still renders (axes, title) with a "no data" note.
std::string render_line_chart(const LineChart& chart);

// values[r * cols + c] in [vmin, vmax] coloured white -> dark blue; a non-finite value or a false entry
// of `shown` (same size, or empty = all shown) is drawn as a grey "masked" cell.
struct Heatmap {
  std::string title;
  std::vector<std::string> row_labels;  // rows = queries
  std::vector<std::string> col_labels;  // cols = keys
  std::vector<double> values;
  std::vector<bool> shown;
  double vmin = 0.0, vmax = 1.0;
  int cell = 10;             // px per cell
  bool cell_titles = false;  // hover text per cell (<title>), for small maps
};

std::string render_heatmap(const Heatmap& map);
// A horizontal colour bar for the heatmap scale, `width` px wide, labelled vmin .. vmax.
std::string render_color_bar(double vmin, double vmax, int width, const std::string& label);

// Helpers shared with the HTML page.
std::string xml_escape(const std::string& text);
std::string format_number(double value);  // compact: 4 significant digits, "1.2e-05", "3200", "0.25"
std::string palette_color(size_t index);  // 10 distinguishable colours, cycled
// `index` of `count` along a dark-purple -> yellow ramp (for per-layer lines: depth reads as colour).
std::string ramp_color(size_t index, size_t count);

// "Nice" tick values covering [lo, hi] (1, 2, 5 x 10^k steps), about `target` of them.
std::vector<double> linear_ticks(double lo, double hi, int target = 5);
// Powers of ten in [lo, hi] (lo > 0), thinned to at most ~8; adds 2x and 5x ticks for narrow ranges.
std::vector<double> log_ticks(double lo, double hi);

}  // namespace causal::svg
