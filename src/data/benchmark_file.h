// Multiple-choice benchmark files (JSONL): HellaSwag's layout and a generic one, detected per line, read
// into the strings the scorer compares (docs/checkpoints.md#benchmarks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace causal {

// What separates a context from each choice, as lm-eval's default target_delimiter.
constexpr const char* kChoiceDelimiter = " ";

struct BenchmarkItem {
  std::string context;               // the text every choice continues
  std::vector<std::string> choices;  // each scored as kChoiceDelimiter + choice; >= 2, none empty
  int64_t answer = 0;                // index of the right choice
  int64_t line = 0;                  // 1-based line of the file it came from
};

struct Benchmark {
  std::string name;  // benchmark_name(path)
  std::string path;
  std::vector<BenchmarkItem> items;  // file order
};

// The name a benchmark is reported under: the file name without its directory and last extension
// ("data/benchmarks/brown-next-sentence.jsonl" -> "brown-next-sentence").
std::string benchmark_name(const std::string& path);

// Reads every non-blank line. A line with "endings" is HellaSwag's: "ctx" (or, when all three are present,
// "activity_label", "ctx_a" and "ctx_b", joined as lm-eval's hellaswag task joins them), "endings" (strings)
// and "label" (an integer, or a string holding one); context and endings are cleaned as lm-eval's hellaswag
// preprocess does. A line with "choices" is generic: "context" (string), "choices" (strings) and "answer"
// (integer index), all taken verbatim. Throws DataError "[benchmark] FILE:LINE: field 'F': problem".
Benchmark read_benchmark(const std::string& path);

}  // namespace causal
