// SVG line charts and heatmaps for the run report (see svg_chart.h).
#include "review/svg_chart.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/hex.h"

namespace causal::svg {
namespace {

constexpr const char* kFont = "font-family=\"Helvetica,Arial,sans-serif\"";
constexpr const char* kMono = "font-family=\"DejaVu Sans Mono,Menlo,Consolas,monospace\"";
constexpr double kCharWidth = 6.4;  // px per character of 11px sans text, for layout estimates

// Pixel coordinates with two decimals: enough for sharp lines, short files.
std::string px(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

struct Rgb {
  double r, g, b;
};

std::string hex(const Rgb& c) {
  auto byte = [](double v) { return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 255.0))); };
  const uint8_t rgb[] = {byte(c.r), byte(c.g), byte(c.b)};
  return "#" + to_hex(rgb, sizeof(rgb));
}

// Piecewise-linear colour ramp through `stops` (evenly spaced), t in [0, 1].
Rgb ramp(const std::vector<Rgb>& stops, double t) {
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0);
  const double at = t * static_cast<double>(stops.size() - 1);
  const size_t i = std::min(static_cast<size_t>(at), stops.size() - 2);
  const double f = at - static_cast<double>(i);
  const Rgb& a = stops[i];
  const Rgb& b = stops[i + 1];
  return {a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f};
}

const std::vector<Rgb>& blues() {
  static const std::vector<Rgb> stops{
      {247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
  return stops;
}

double text_width(const std::string& text, double char_width = kCharWidth) {
  // UTF-8 continuation bytes do not start a character.
  size_t chars = 0;
  for (unsigned char c : text) chars += (c & 0xC0) != 0x80 ? 1 : 0;
  return static_cast<double>(chars) * char_width;
}

// One axis mapping data -> pixels; log axes map log10(value).
struct Scale {
  double lo = 0, hi = 1;  // domain (already log10 for log axes)
  double p0 = 0, p1 = 1;  // pixel range
  bool log = false;
  double operator()(double v) const {
    const double d = log ? std::log10(v) : v;
    return p0 + (d - lo) / (hi - lo) * (p1 - p0);
  }
};

bool usable(double x, double y, bool log_y) {
  return std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0.0);
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return "0";
  const double a = std::fabs(value);
  if (a >= 1e4 && a < 1e9) {  // 22904 -> 22.9k, 1.5e6 -> 1.5M
    const bool mega = a >= 1e6;
    return fmt::format("{:.3g}{}", value / (mega ? 1e6 : 1e3), mega ? "M" : "k");
  }
  if (a < 1e-3 || a >= 1e9) {  // 1.2e-05 -> 1.2e-5
    const std::string s = fmt::format("{:.2e}", value);
    const size_t e = s.find('e');
    std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
    while (mantissa.find('.') != std::string::npos && (mantissa.back() == '0' || mantissa.back() == '.')) {
      const bool dot = mantissa.back() == '.';
      mantissa.pop_back();
      if (dot) break;
    }
    const bool negative = exponent[0] == '-';
    size_t digits = exponent.find_first_not_of("+-0");
    exponent = digits == std::string::npos ? "0" : exponent.substr(digits);
    return mantissa + "e" + (negative ? "-" : "") + exponent;
  }
  return fmt::format("{:.4g}", value);
}

std::string palette_color(size_t index) {
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kColors[index % 10];
}

std::string ramp_color(size_t index, size_t count) {
  static const std::vector<Rgb> stops{
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {223, 200, 30}};
  const double t = count <= 1 ? 0.0 : static_cast<double>(index) / static_cast<double>(count - 1);
  return hex(ramp(stops, 0.92 * t));  // stop short of the palest yellow: lines must stay visible on white
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return ticks;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  const double first = std::ceil(lo / step - 1e-9);  // in steps
  for (int i = 0; i < 50; ++i) {
    const double v = (first + i) * step;  // multiplied, not accumulated: no drift
    if (v > hi + step * 1e-9) break;
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> ticks;
  if (!(lo > 0.0) || !std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return ticks;
  const int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  const int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  const int decades = e1 - e0;
  const int stride = std::max(1, (decades + 7) / 8);
  const bool fine = decades <= 2;
  for (int e = e0; e <= e1; ++e) {
    const double base = std::pow(10.0, e);
    if ((e - e0) % stride == 0 && base >= lo * (1 - 1e-9) && base <= hi * (1 + 1e-9)) ticks.push_back(base);
    if (!fine) continue;
    for (double m : {2.0, 5.0}) {
      const double v = m * base;
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  std::sort(ticks.begin(), ticks.end());
  return ticks;
}

namespace {

// Where a line chart draws: the plot area in pixels, the data's x range and the y axis with its ticks.
struct Frame {
  double left = 66, right = 18, top = 34, bottom = 44;
  double width = 0, plot_w = 0, plot_h = 0;
  double x_lo = 0, x_hi = 1;
  size_t drawable = 0;  // points that can be drawn (finite, and > 0 on a log axis)
  Scale xs, ys;
  std::vector<double> y_ticks;
  double y_dom_lo = 0, y_dom_hi = 1;

  bool in_y_domain(double v) const {
    const double eps = (y_dom_hi - y_dom_lo) * 1e-9;
    return v >= y_dom_lo - eps && v <= y_dom_hi + eps;
  }
};

// The data range over every drawable point and its error bars, widened by the chart's fixed bounds.
void data_range(const LineChart& chart, Frame& f, double& y_lo, double& y_hi) {
  f.x_lo = std::numeric_limits<double>::infinity();
  f.x_hi = -f.x_lo;
  y_lo = f.x_lo;
  y_hi = -f.x_lo;
  for (const Series& s : chart.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!usable(s.x[i], s.y[i], chart.log_y)) continue;
      ++f.drawable;
      f.x_lo = std::min(f.x_lo, s.x[i]);
      f.x_hi = std::max(f.x_hi, s.x[i]);
      const double err = i < s.y_err.size() && std::isfinite(s.y_err[i]) ? std::fabs(s.y_err[i]) : 0.0;
      y_lo = std::min(y_lo, chart.log_y && s.y[i] - err <= 0.0 ? s.y[i] : s.y[i] - err);
      y_hi = std::max(y_hi, s.y[i] + err);
    }
  }
  if (!chart.x_categories.empty()) {  // half a category of margin on each side
    f.x_lo = -0.5;
    f.x_hi = static_cast<double>(chart.x_categories.size()) - 0.5;
  }
  if (f.drawable == 0) {
    f.x_lo = 0, f.x_hi = 1;
    y_lo = chart.log_y ? 1 : 0;
    y_hi = chart.log_y ? 10 : 1;
  }
  if (std::isfinite(chart.x_min)) f.x_lo = f.drawable ? std::min(f.x_lo, chart.x_min) : chart.x_min;
  if (std::isfinite(chart.x_max))
    f.x_hi = f.drawable || std::isfinite(chart.x_min) ? std::max(f.x_hi, chart.x_max) : chart.x_max;
  if (f.x_hi < f.x_lo) std::swap(f.x_lo, f.x_hi);
  bool y_from_data = f.drawable > 0;
  for (double y : {chart.y_min, chart.y_max}) {
    if (!usable(0.0, y, chart.log_y)) continue;
    y_lo = y_from_data ? std::min(y_lo, y) : y;
    y_hi = y_from_data ? std::max(y_hi, y) : y;
    y_from_data = true;
  }
  if (!chart.x_categories.empty()) return;  // the category range stands
  if (f.x_hi == f.x_lo) {                   // a single step: centre it
    f.x_lo -= 1;
    f.x_hi += 1;
  } else if (f.x_lo > 0 && f.x_lo <= 0.05 * (f.x_hi - f.x_lo)) {
    f.x_lo = 0;  // steps from 1: let the axis start at 0 for a round first tick
  }
}

// The y axis: decades on a log axis; else round ticks, the domain widened to the enclosing ones.
void y_axis(const LineChart& chart, Frame& f, double y_lo, double y_hi) {
  f.ys.p0 = f.top + f.plot_h;
  f.ys.p1 = f.top;
  if (chart.log_y) {
    double a = std::floor(std::log10(y_lo) + 1e-9), b = std::ceil(std::log10(y_hi) - 1e-9);
    if (b <= a) b = a + 1;  // constant series or within one decade boundary
    f.ys.lo = a, f.ys.hi = b, f.ys.log = true;
    f.y_ticks = log_ticks(std::pow(10.0, a), std::pow(10.0, b));
  } else {
    if (y_hi == y_lo) {  // constant series: a band around it
      const double pad = y_lo == 0.0 ? 1.0 : std::fabs(y_lo) * 0.1;
      y_lo -= pad;
      y_hi += pad;
    }
    f.y_ticks = linear_ticks(y_lo, y_hi, 5);
    if (f.y_ticks.size() >= 2) {
      const double step = f.y_ticks[1] - f.y_ticks[0];
      if (f.y_ticks.front() > y_lo + step * 1e-9)
        f.y_ticks.insert(f.y_ticks.begin(), f.y_ticks.front() - step);
      if (f.y_ticks.back() < y_hi - step * 1e-9) f.y_ticks.push_back(f.y_ticks.back() + step);
      y_lo = f.y_ticks.front();
      y_hi = f.y_ticks.back();
    }
    f.ys.lo = y_lo, f.ys.hi = y_hi;
  }
  f.y_dom_lo = f.ys.log ? std::pow(10.0, f.ys.lo) : f.ys.lo;
  f.y_dom_hi = f.ys.log ? std::pow(10.0, f.ys.hi) : f.ys.hi;
}

Frame line_chart_frame(const LineChart& chart) {
  Frame f;
  f.width = std::max(chart.width, 200);
  f.plot_w = f.width - f.left - f.right;
  f.plot_h = std::max(chart.plot_height, 60);
  double y_lo = 0, y_hi = 1;
  data_range(chart, f, y_lo, y_hi);
  f.xs = Scale{f.x_lo, f.x_hi, f.left, f.left + f.plot_w, false};
  y_axis(chart, f, y_lo, y_hi);
  return f;
}

// Legend items flow left to right under the x axis, wrapping.
struct LegendItem {
  double x, y;
  const Series* s;
  std::string color;
};

std::vector<LegendItem> legend_layout(const LineChart& chart, const Frame& f) {
  std::vector<LegendItem> items;
  double lx = f.left, ly = f.top + f.plot_h + f.bottom + 6;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    if (s.name.empty()) continue;
    const double w = 26 + text_width(s.name) + 16;
    if (lx + w > f.width - f.right && lx > f.left) {
      lx = f.left;
      ly += 16;
    }
    items.push_back({lx, ly, &s, s.color.empty() ? palette_color(i) : s.color});
    lx += w;
  }
  return items;
}

void draw_grid_and_axes(std::ostringstream& o, const LineChart& chart, const Frame& f) {
  o << "<g stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
  for (double t : f.y_ticks) {
    if (!f.in_y_domain(t)) continue;
    o << "<line x1=\"" << px(f.left) << "\" x2=\"" << px(f.left + f.plot_w) << "\" y1=\"" << px(f.ys(t))
      << "\" y2=\"" << px(f.ys(t)) << "\"/>\n";
  }
  std::vector<double> x_ticks = linear_ticks(f.x_lo, f.x_hi, std::max(2, static_cast<int>(f.plot_w / 90)));
  if (!chart.x_categories.empty()) {
    x_ticks.clear();
    for (size_t i = 0; i < chart.x_categories.size(); ++i) x_ticks.push_back(static_cast<double>(i));
  } else if (chart.integer_x) {  // steps are whole numbers: no 1.5 ticks
    x_ticks.erase(std::remove_if(x_ticks.begin(), x_ticks.end(), [](double t) { return t != std::floor(t); }),
                  x_ticks.end());
  }
  for (double t : x_ticks) {
    o << "<line x1=\"" << px(f.xs(t)) << "\" x2=\"" << px(f.xs(t)) << "\" y1=\"" << px(f.top) << "\" y2=\""
      << px(f.top + f.plot_h) << "\"/>\n";
  }
  o << "</g>\n";
  o << "<g fill=\"#444\">\n";
  for (double t : f.y_ticks) {
    if (!f.in_y_domain(t)) continue;
    o << "<text x=\"" << px(f.left - 6) << "\" y=\"" << px(f.ys(t) + 4) << "\" text-anchor=\"end\">"
      << xml_escape(format_number(t)) << "</text>\n";
  }
  for (double t : x_ticks) {
    const size_t category = static_cast<size_t>(t);
    const std::string label = chart.x_categories.empty()
                                  ? format_number(t)
                                  : chart.x_categories[std::min(category, chart.x_categories.size() - 1)];
    o << "<text x=\"" << px(f.xs(t)) << "\" y=\"" << px(f.top + f.plot_h + 16) << "\" text-anchor=\"middle\">"
      << xml_escape(label) << "</text>\n";
  }
  o << "</g>\n";
  o << "<rect x=\"" << px(f.left) << "\" y=\"" << px(f.top) << "\" width=\"" << px(f.plot_w) << "\" height=\""
    << px(f.plot_h) << "\" fill=\"none\" stroke=\"#999\"/>\n";
  o << "<text x=\"" << px(f.left + f.plot_w / 2) << "\" y=\"" << px(f.top + f.plot_h + 34)
    << "\" text-anchor=\"middle\" fill=\"#222\">" << xml_escape(chart.x_label) << "</text>\n";
  o << "<text transform=\"translate(14," << px(f.top + f.plot_h / 2)
    << ") rotate(-90)\" text-anchor=\"middle\" "
    << "fill=\"#222\">" << xml_escape(chart.y_label) << "</text>\n";
}

// Reference lines (dashed), labelled at their end.
void draw_reference_lines(std::ostringstream& o, const LineChart& chart, const Frame& f) {
  for (const RefLine& r : chart.y_lines) {
    if (!usable(0.0, r.at, chart.log_y) || !f.in_y_domain(r.at)) continue;
    const double y = f.ys(r.at);
    o << "<line x1=\"" << px(f.left) << "\" x2=\"" << px(f.left + f.plot_w) << "\" y1=\"" << px(y)
      << "\" y2=\"" << px(y) << "\" stroke=\"" << r.color << "\" stroke-dasharray=\"6 4\"/>\n";
    o << "<text x=\"" << px(f.left + f.plot_w - 4) << "\" y=\"" << px(y - 4)
      << "\" text-anchor=\"end\" fill=\"" << r.color << "\" font-size=\"10\">" << xml_escape(r.label)
      << "</text>\n";
  }
  for (const RefLine& r : chart.x_lines) {
    if (!std::isfinite(r.at) || r.at < f.x_lo || r.at > f.x_hi) continue;
    const double x = f.xs(r.at);
    o << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << px(f.top) << "\" y2=\""
      << px(f.top + f.plot_h) << "\" stroke=\"" << r.color << "\" stroke-dasharray=\"3 3\"/>\n";
    o << "<text x=\"" << px(x + 3) << "\" y=\"" << px(f.top + 11) << "\" fill=\"" << r.color
      << "\" font-size=\"10\">" << xml_escape(r.label) << "</text>\n";
  }
}

// One series: its line broken at undrawable points, whiskers (mean +- std), then markers on top.
void draw_series(std::ostringstream& o, const LineChart& chart, const Frame& f, const Series& s,
                 const std::string& color) {
  const size_t n = std::min(s.x.size(), s.y.size());
  const std::string opacity = s.opacity < 1.0 ? " opacity=\"" + px(s.opacity) + "\"" : "";
  const auto drawable = [&](size_t k) { return usable(s.x[k], s.y[k], chart.log_y); };
  if (s.style != SeriesStyle::kMarkers) {
    std::string d;
    bool pen_down = false;
    for (size_t k = 0; k < n; ++k) {
      if (!drawable(k)) {
        pen_down = false;
        continue;
      }
      d += (pen_down ? "L" : "M") + px(f.xs(s.x[k])) + " " + px(f.ys(s.y[k]));
      pen_down = true;
    }
    if (!d.empty()) {
      o << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.6\""
        << " stroke-linejoin=\"round\"" << (s.dashed ? " stroke-dasharray=\"5 3\"" : "") << opacity << "/>\n";
    }
  }
  for (size_t k = 0; k < n && k < s.y_err.size(); ++k) {
    if (!drawable(k) || !std::isfinite(s.y_err[k]) || s.y_err[k] == 0.0) continue;
    const double err = std::fabs(s.y_err[k]);
    const double lo = chart.log_y && s.y[k] - err <= 0.0 ? s.y[k] : s.y[k] - err;
    const double x = f.xs(s.x[k]), y0 = f.ys(lo), y1 = f.ys(s.y[k] + err);
    o << "<path class=\"whisker\" d=\"M" << px(x) << " " << px(y0) << "V" << px(y1) << "M" << px(x - 4) << " "
      << px(y0) << "H" << px(x + 4) << "M" << px(x - 4) << " " << px(y1) << "H" << px(x + 4)
      << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.2\"" << opacity << "/>\n";
  }
  // A lone point of a line series gets a dot too, or it would be invisible.
  const bool markers = s.style != SeriesStyle::kLine;
  for (size_t k = 0; k < n; ++k) {
    if (!drawable(k)) continue;
    if (!markers && ((k > 0 && drawable(k - 1)) || (k + 1 < n && drawable(k + 1)))) continue;
    const double r = markers ? s.marker_radius : 2.5;
    o << "<circle cx=\"" << px(f.xs(s.x[k])) << "\" cy=\"" << px(f.ys(s.y[k])) << "\" r=\"" << px(r) << "\""
      << (s.hollow ? " fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1\"" : " fill=\"" + color + "\"")
      << opacity << "/>\n";
  }
}

void draw_legend(std::ostringstream& o, const std::vector<LegendItem>& items) {
  for (const LegendItem& it : items) {
    const Series& s = *it.s;
    const double cy = it.y + 4;
    if (s.style != SeriesStyle::kMarkers) {
      o << "<line x1=\"" << px(it.x) << "\" x2=\"" << px(it.x + 20) << "\" y1=\"" << px(cy) << "\" y2=\""
        << px(cy) << "\" stroke=\"" << it.color << "\" stroke-width=\"2\""
        << (s.dashed ? " stroke-dasharray=\"5 3\"" : "") << "/>\n";
    }
    if (s.style != SeriesStyle::kLine) {
      o << "<circle cx=\"" << px(it.x + 10) << "\" cy=\"" << px(cy) << "\" r=\"" << px(s.marker_radius)
        << "\"" << (s.hollow ? " fill=\"none\" stroke=\"" + it.color + "\"" : " fill=\"" + it.color + "\"")
        << "/>\n";
    }
    o << "<text x=\"" << px(it.x + 26) << "\" y=\"" << px(cy + 4) << "\" fill=\"#222\">" << xml_escape(s.name)
      << "</text>\n";
  }
}

}  // namespace

std::string render_line_chart(const LineChart& chart) {
  const Frame f = line_chart_frame(chart);
  const std::vector<LegendItem> items = legend_layout(chart, f);
  const double height = (items.empty() ? f.top + f.plot_h + f.bottom : items.back().y + 14) + 4;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" << px(f.width) << "\" height=\""
    << px(height) << "\" viewBox=\"0 0 " << px(f.width) << " " << px(height) << "\" " << kFont
    << " font-size=\"11\" role=\"img\">\n";
  o << "<title>" << xml_escape(chart.title) << "</title>\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << px(f.width) << "\" height=\"" << px(height)
    << "\" fill=\"#fff\"/>\n";
  o << "<text x=\"" << px(f.left) << "\" y=\"20\" font-size=\"13\" font-weight=\"bold\">"
    << xml_escape(chart.title) << "</text>\n";
  draw_grid_and_axes(o, chart, f);
  draw_reference_lines(o, chart, f);
  // Series in layer order.
  std::vector<size_t> order(chart.series.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return chart.series[a].layer < chart.series[b].layer; });
  for (size_t i : order) {
    const Series& s = chart.series[i];
    draw_series(o, chart, f, s, s.color.empty() ? palette_color(i) : s.color);
  }
  if (f.drawable == 0) {
    o << "<text x=\"" << px(f.left + f.plot_w / 2) << "\" y=\"" << px(f.top + f.plot_h / 2)
      << "\" text-anchor=\"middle\" fill=\"#999\" font-size=\"13\">no data</text>\n";
  }
  draw_legend(o, items);
  o << "</svg>\n";
  return o.str();
}

std::string render_heatmap(const Heatmap& map) {
  const size_t rows = map.row_labels.size(), cols = map.col_labels.size();
  const double cell = std::max(map.cell, 3);
  const double label_font = std::clamp(cell - 1.0, 7.0, 11.0);
  const double char_w = label_font * 0.62;
  double row_label_w = 0, col_label_h = 0;
  for (const auto& l : map.row_labels) row_label_w = std::max(row_label_w, text_width(l, char_w));
  for (const auto& l : map.col_labels) col_label_h = std::max(col_label_h, text_width(l, char_w));
  const double title_h = 18;
  const double left = row_label_w + 6, top = title_h + col_label_h + 6;
  const double grid_w = cell * static_cast<double>(cols), grid_h = cell * static_cast<double>(rows);
  const double width = std::max(left + grid_w + 4, text_width(map.title) + 4);
  const double height = top + grid_h + 4;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"heatmap\" width=\"" << px(width) << "\" height=\""
    << px(height) << "\" viewBox=\"0 0 " << px(width) << " " << px(height) << "\" " << kFont
    << " font-size=\"11\" role=\"img\">\n";
  o << "<title>" << xml_escape(map.title) << "</title>\n";
  o << "<text x=\"0\" y=\"13\" font-size=\"12\" font-weight=\"bold\">" << xml_escape(map.title)
    << "</text>\n";
  // Masked cells show the background.
  o << "<rect x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\"" << px(grid_w) << "\" height=\""
    << px(grid_h) << "\" fill=\"#e4e4e4\"/>\n";
  o << "<g>\n";
  const double span = map.vmax > map.vmin ? map.vmax - map.vmin : 1.0;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const size_t k = r * cols + c;
      if (k >= map.values.size()) continue;
      const double v = map.values[k];
      if (!std::isfinite(v) || (!map.shown.empty() && (k >= map.shown.size() || !map.shown[k]))) continue;
      o << "<rect x=\"" << px(left + cell * static_cast<double>(c)) << "\" y=\""
        << px(top + cell * static_cast<double>(r)) << "\" width=\"" << px(cell) << "\" height=\"" << px(cell)
        << "\" fill=\"" << hex(ramp(blues(), (v - map.vmin) / span)) << "\"";
      if (map.cell_titles) {
        o << "><title>" << xml_escape(map.row_labels[r]) << " \u2192 " << xml_escape(map.col_labels[c])
          << ": " << format_number(v) << "</title></rect>\n";
      } else {
        o << "/>\n";
      }
    }
  }
  o << "</g>\n";
  o << "<rect x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\"" << px(grid_w) << "\" height=\""
    << px(grid_h) << "\" fill=\"none\" stroke=\"#888\" stroke-width=\"0.6\"/>\n";
  // Token labels: queries on the left, keys rotated on top.
  o << "<g " << kMono << " font-size=\"" << px(label_font) << "\" fill=\"#333\">\n";
  for (size_t r = 0; r < rows; ++r) {
    o << "<text x=\"" << px(left - 3) << "\" y=\""
      << px(top + cell * (static_cast<double>(r) + 0.5) + label_font * 0.35) << "\" text-anchor=\"end\">"
      << xml_escape(map.row_labels[r]) << "</text>\n";
  }
  for (size_t c = 0; c < cols; ++c) {
    o << "<text transform=\"translate("
      << px(left + cell * (static_cast<double>(c) + 0.5) + label_font * 0.35) << "," << px(top - 3)
      << ") rotate(-90)\">" << xml_escape(map.col_labels[c]) << "</text>\n";
  }
  o << "</g>\n</svg>\n";
  return o.str();
}

std::string render_color_bar(double vmin, double vmax, int width, const std::string& label) {
  const int steps = 40;
  const double x0 = 8, bar_w = std::max(width, 160) - 90.0, swatch = x0 + bar_w + 16;
  const double w = swatch + 64;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"colorbar\" width=\"" << px(w)
    << "\" height=\"46\" viewBox=\"0 0 " << px(w) << " 46\" " << kFont << " font-size=\"11\" role=\"img\">\n";
  o << "<title>" << xml_escape(label) << "</title>\n";
  o << "<text x=\"" << px(x0) << "\" y=\"11\" fill=\"#222\">" << xml_escape(label) << "</text>\n";
  for (int i = 0; i < steps; ++i) {
    const double t = (i + 0.5) / steps;
    o << "<rect x=\"" << px(x0 + bar_w * i / steps) << "\" y=\"16\" width=\"" << px(bar_w / steps + 0.5)
      << "\" height=\"12\" fill=\"" << hex(ramp(blues(), t)) << "\"/>\n";
  }
  o << "<rect x=\"" << px(x0) << "\" y=\"16\" width=\"" << px(bar_w) << "\" height=\"12\" fill=\"none\" "
    << "stroke=\"#888\" stroke-width=\"0.6\"/>\n";
  for (double f : {0.0, 0.5, 1.0}) {
    const char* anchor = f == 0.0 ? "start" : f == 1.0 ? "end" : "middle";
    o << "<text x=\"" << px(x0 + bar_w * f) << "\" y=\"42\" text-anchor=\"" << anchor << "\">"
      << format_number(vmin + (vmax - vmin) * f) << "</text>\n";
  }
  o << "<rect x=\"" << px(swatch) << "\" y=\"16\" width=\"12\" height=\"12\" fill=\"#e4e4e4\" "
    << "stroke=\"#888\" stroke-width=\"0.6\"/>\n";
  o << "<text x=\"" << px(swatch + 16) << "\" y=\"26\">masked</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace causal::svg
