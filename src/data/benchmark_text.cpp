// lm-eval-harness's hellaswag text clean-up in C++, with Python's meanings.
#include "data/benchmark_text.h"

#include <cctype>

#include "data/python_text.h"

namespace causal {

std::string hellaswag_preprocess(std::string_view raw) {
  const std::string_view stripped = python_strip(raw);
  std::string titled;
  const std::string_view title = " [title]";
  for (size_t i = 0; i < stripped.size();) {
    if (stripped.substr(i, title.size()) == title) {
      titled += ". ";
      i += title.size();
    } else {
      titled += stripped[i++];
    }
  }
  // re.sub(r"\[.*?\]", "", text): the shortest "[...]" from each '[', where '.' does not match a newline.
  std::string unbracketed;
  for (size_t i = 0; i < titled.size();) {
    if (titled[i] == '[') {
      const size_t close = titled.find_first_of("]\n", i + 1);
      if (close != std::string::npos && titled[close] == ']') {
        i = close + 1;
        continue;
      }
    }
    unbracketed += titled[i++];
  }
  std::string out;
  for (size_t i = 0; i < unbracketed.size();) {
    out += unbracketed[i];
    i += unbracketed.compare(i, 2, "  ") == 0 ? 2 : 1;
  }
  return out;
}

std::string hellaswag_query(std::string_view activity_label, std::string_view ctx_a, std::string_view ctx_b) {
  std::string capitalized(ctx_b);
  for (size_t i = 0; i < capitalized.size(); ++i) {
    const auto c = static_cast<unsigned char>(capitalized[i]);
    if (c < 0x80) capitalized[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return hellaswag_preprocess(std::string(activity_label) + ": " + std::string(ctx_a) + " " + capitalized);
}

}  // namespace causal
