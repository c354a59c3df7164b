// libFuzzer harness: a multiple-choice benchmark file (`causal eval --tasks`), HellaSwag's layout or the
// generic one. It reads into items whose answer indexes a choice, or is refused with a DataError.
#include <string>

#include "data/benchmark_file.h"
#include "fuzz_support.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("input.jsonl", data, size);
  try {
    const Benchmark benchmark = read_benchmark(path);
    for (const BenchmarkItem& item : benchmark.items) {
      fuzz::require(item.choices.size() >= 2, "at least two choices");
      fuzz::require(item.answer >= 0 && item.answer < static_cast<int64_t>(item.choices.size()),
                    "the answer indexes a choice");
      fuzz::require(item.line >= 1, "items name their line");
    }
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
