// Test helper: headless Chromium, to check that an HTML page this project writes renders in a real browser.
// Tests that need it print "SKIPPED: chromium not installed" (CTest then reports them skipped) when absent.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/cli.h"

namespace causal::testing {

inline std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    if (std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0) return name;
  }
  return "";
}

// Screenshots `report` with headless Chromium into `png`; checks it is a real 1280-wide PNG of some size.
inline void check_renders(const std::string& chromium, const fs::path& report, const fs::path& png) {
  const fs::path profile = png.parent_path() / "chromium-profile";
  const std::string cmd = "timeout 180 " + chromium +
                          " --headless --disable-gpu --no-sandbox --hide-scrollbars --no-first-run "
                          "--disable-dev-shm-usage --user-data-dir=" +
                          profile.string() + " --window-size=1280,3000 --screenshot=" + png.string() +
                          " file://" + fs::absolute(report).string() + " >" + png.string() + ".log 2>&1";
  CATCH_INFO(cmd);
  CATCH_CHECK(std::system(cmd.c_str()) == 0);
  CATCH_REQUIRE(fs::exists(png));
  CATCH_CHECK(fs::file_size(png) > 20000);
  const std::string bytes = slurp(png);
  CATCH_REQUIRE(bytes.size() > 24);
  CATCH_CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CATCH_CHECK(bytes.substr(12, 4) == "IHDR");
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at])) << 24) |
           (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
  };
  CATCH_CHECK(be32(16) == 1280);
  CATCH_CHECK(be32(20) == 3000);
  if (const char* keep = std::getenv("CAUSAL_REPORT_PNG_DIR")) {
    fs::create_directories(keep);
    fs::copy_file(png, fs::path(keep) / png.filename(), fs::copy_options::overwrite_existing);
  }
}

// The DOM Chromium builds from `page` after parsing and layout (--dump-dom), for assertions on what a
// browser actually shows (parsed tables, SVG elements), not on the bytes written.
inline std::string dump_dom(const std::string& chromium, const fs::path& page, const fs::path& work) {
  const fs::path out = work / (page.filename().string() + ".dom.html");
  const std::string cmd = "timeout 180 " + chromium +
                          " --headless --disable-gpu --no-sandbox --no-first-run --disable-dev-shm-usage "
                          "--user-data-dir=" +
                          (work / "chromium-profile").string() + " --dump-dom file://" +
                          fs::absolute(page).string() + " >" + out.string() + " 2>" + out.string() + ".log";
  CATCH_INFO(cmd);
  CATCH_CHECK(std::system(cmd.c_str()) == 0);
  return slurp(out);
}

}  // namespace causal::testing
