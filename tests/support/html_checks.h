// Test helper: checks on the HTML pages causal writes: tags balanced, nothing fetched, no script.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace causal::testing {

// How often `needle` occurs in `text`, without overlaps.
inline size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

// Every opened tag is closed in order (HTML void elements and <!...> aside). Returns "" or the problem.
inline std::string tag_balance_problem(const std::string& text) {
  static const std::vector<std::string> kVoid{"meta", "br", "hr", "img", "input", "link"};
  std::vector<std::string> open;
  for (size_t at = text.find('<'); at != std::string::npos; at = text.find('<', at + 1)) {
    const size_t end = text.find('>', at);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(at);
    const std::string tag = text.substr(at + 1, end - at - 1);
    if (tag.empty() || tag[0] == '!' || tag[0] == '?') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return "</" + name + "> closes <" + (open.empty() ? std::string("nothing") : open.back()) + ">";
      }
      open.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;  // self-closing
    const std::string name = tag.substr(0, tag.find_first_of(" \n\t"));
    if (std::find(kVoid.begin(), kVoid.end(), name) == kVoid.end()) open.push_back(name);
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

// The page may name no network resource: the only URL allowed is the SVG namespace.
inline void check_self_contained(const std::string& html) {
  std::string rest = html;
  for (size_t at; (at = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;) rest.erase(at, 26);
  CATCH_CHECK(rest.find("http://") == std::string::npos);
  CATCH_CHECK(rest.find("https://") == std::string::npos);
  CATCH_CHECK(rest.find("<script") == std::string::npos);
  CATCH_CHECK(rest.find("src=") == std::string::npos);
  CATCH_CHECK(rest.find("<link") == std::string::npos);
  CATCH_CHECK(rest.find("@import") == std::string::npos);
  CATCH_CHECK(tag_balance_problem(html) == "");
}

}  // namespace causal::testing
