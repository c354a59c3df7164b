// The frame shared by causal's HTML pages (run report, sweep summary): one inline stylesheet, a footer
// saying when and from what the page was made. Self-contained: no script, nothing fetched.
#pragma once

#include <string>

namespace causal {

// "<!DOCTYPE html> ... <body>" with `title` (escaped here) and the shared stylesheet.
std::string page_start(const std::string& title);

// The footer (generated when, by which causal and LibTorch, from `source`) and the closing tags.
std::string page_end(const std::string& source);

}  // namespace causal
