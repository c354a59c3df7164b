// The shared page frame (see html_page.h).
#include "review/html_page.h"

#include <torch/version.h>

#include <ctime>

#include "review/report.h"
#include "review/svg_chart.h"

namespace causal {
namespace {

constexpr const char* kStyle = R"(
body { font-family: Helvetica, Arial, sans-serif; color: #222; margin: 0 auto; padding: 16px 24px;
       max-width: 1260px; background: #f6f6f4; font-size: 14px; }
h1 { margin: 4px 0; font-size: 24px; }
h2 { margin: 28px 0 10px; font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 4px; }
h3 { margin: 4px 0 8px; font-size: 14px; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; }
.meta { color: #555; margin: 2px 0; }
.cols { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.box { background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 10px 12px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 14px; }
.card { background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 6px 8px; }
.card svg { display: block; max-width: 100%; height: auto; }
.cap { color: #555; font-size: 12px; margin: 2px 4px 4px; }
.note { color: #7a5a00; background: #fff8e1; border: 1px solid #f0dca0; border-radius: 4px; padding: 8px 10px;
        margin: 6px 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
th { color: #555; font-weight: normal; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr + tr td, tr + tr th { border-top: 1px solid #eee; }
.pass { color: #1a7f37; font-weight: bold; }
.fail { color: #c62828; font-weight: bold; }
.bar { display: inline-block; height: 9px; background: #6baed6; vertical-align: middle; }
.maps { display: flex; flex-wrap: wrap; gap: 10px 18px; }
.scroll { overflow-x: auto; max-width: 100%; }
footer { color: #777; font-size: 12px; margin: 32px 0 8px; border-top: 1px solid #ccc; padding-top: 6px; }
)";

std::string now_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

std::string page_start(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
         svg::xml_escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
}

std::string page_end(const std::string& source) {
  return "<footer>Generated " + now_utc() + " by causal " + kCausalVersion + " (LibTorch " + TORCH_VERSION +
         ") from <code>" + svg::xml_escape(source) + "</code>.</footer>\n</body>\n</html>\n";
}

}  // namespace causal
