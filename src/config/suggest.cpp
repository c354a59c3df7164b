// "Did you mean" hints for unknown config keys.
#include "config/suggest.h"

#include <algorithm>
#include <cctype>

namespace causal {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Short keys tolerate one edit; longer ones a few more (a typo rate, not an absolute count).
std::size_t tolerance(const std::string& key) {
  if (key.size() <= 3) return 1;
  if (key.size() <= 6) return 2;
  return 3;
}

}  // namespace

std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  // d[i][j]: distance between the first i characters of a and the first j of b.
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string closest_key(const std::string& key, const std::vector<std::string>& valid) {
  const std::string k = lower(key);
  std::string best;
  std::size_t best_distance = tolerance(key) + 1;
  for (const std::string& candidate : valid) {
    const std::size_t distance = edit_distance(k, lower(candidate));
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (!best.empty()) return best;
  // A dropped prefix or suffix ("hidden" for "ffn_hidden") is too many edits but an obvious intent.
  if (k.size() >= 3) {
    for (const std::string& candidate : valid) {
      const std::string c = lower(candidate);
      if (c.find(k) != std::string::npos || k.find(c) != std::string::npos) return candidate;
    }
  }
  return "";
}

std::string unknown_key_problem(const std::string& key, const std::vector<std::string>& valid,
                                const KeysElsewhere& elsewhere, const std::vector<std::string>& same_name) {
  for (const auto& [other, reason] : elsewhere) {
    if (other == key) return "unknown key '" + key + "' here: it " + reason;
  }
  // An exact name in another section beats a fuzzy guess here ("steps" in train.optimizer is not "eps").
  if (!same_name.empty()) {
    std::string paths;
    for (std::size_t i = 0; i < same_name.size(); ++i) {
      paths += (i == 0 ? "" : (i + 1 == same_name.size() ? " or " : ", ")) + ("'" + same_name[i] + "'");
    }
    return "unknown key '" + key + "' here; did you mean " + paths + "?";
  }
  const std::string guess = closest_key(key, valid);
  if (!guess.empty()) return "unknown key '" + key + "'; did you mean '" + guess + "'?";
  std::string list;
  for (const std::string& v : valid) list += (list.empty() ? "" : ", ") + v;
  return "unknown key '" + key + "'; valid keys here: " + list;
}

}  // namespace causal
