// Python's whitespace and len() on UTF-8.
#include "data/python_text.h"

namespace causal {

bool python_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

namespace {

bool continuation_byte(unsigned char b) { return (b & 0xc0) == 0x80; }

// The code point of text[begin, end), a lead byte and its continuation bytes; U+FFFD (never a space) when
// the lead byte announces another length.
char32_t decode(std::string_view text, size_t begin, size_t end) {
  const auto lead = static_cast<unsigned char>(text[begin]);
  const size_t length = end - begin;
  const size_t announced = lead < 0x80         ? 1
                           : (lead >> 5) == 6  ? 2
                           : (lead >> 4) == 14 ? 3
                           : (lead >> 3) == 30 ? 4
                                               : 0;
  if (announced != length) return 0xfffd;
  if (length == 1) return lead;
  char32_t c = lead & (0x7f >> length);
  for (size_t i = begin + 1; i < end; ++i) c = (c << 6) | (static_cast<unsigned char>(text[i]) & 0x3f);
  return c;
}

// Length of the sequence starting at text[begin] (1 for a stray byte).
size_t sequence_length(std::string_view text, size_t begin) {
  size_t end = begin + 1;
  while (end < text.size() && continuation_byte(static_cast<unsigned char>(text[end]))) ++end;
  return end - begin;
}

}  // namespace

std::string_view python_rstrip(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && continuation_byte(static_cast<unsigned char>(text[begin]))) --begin;
    if (!python_isspace(decode(text, begin, end))) break;
    end = begin;
  }
  return text.substr(0, end);
}

std::string_view python_strip(std::string_view text) {
  text = python_rstrip(text);
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t length = sequence_length(text, begin);
    if (!python_isspace(decode(text, begin, begin + length))) break;
    begin += length;
  }
  return text.substr(begin);
}

int64_t code_points(std::string_view text) {
  int64_t count = 0;
  for (unsigned char b : text) count += continuation_byte(b) ? 0 : 1;
  return count;
}

}  // namespace causal
