// Scoring a language model on multiple-choice benchmarks as lm-eval-harness does: each choice's summed
// log-probability given the context; acc (the likeliest choice), acc_norm (the likeliest per character of
// the choice) and their 95% intervals (docs/checkpoints.md#benchmarks).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/benchmark_file.h"
#include "data/tokenizer.h"
#include "model/transformer.h"

namespace causal {

struct ItemScore {
  int64_t line = 0;              // of the benchmark file
  int64_t answer = 0;            // the right choice
  std::vector<double> logprobs;  // summed log-probability of each choice's tokens given the context
  int64_t predicted = 0;         // argmax of logprobs (the first on a tie, as numpy)
  int64_t predicted_norm = 0;    // argmax of logprobs / characters of the choice
};

struct BenchmarkReport {
  std::string name;
  std::string path;
  int64_t items = 0;
  int64_t choices = 0;            // pairs scored (items x their choices)
  int64_t truncated_choices = 0;  // pairs longer than model.max_seq_len, cut from the left
  double acc = 0.0, acc_norm = 0.0;
  double acc_stderr = 0.0, acc_norm_stderr = 0.0;  // sample std / sqrt(n), lm-eval's mean_stderr
  double chance = 0.0;                             // mean over items of 1 / choices
  double seconds = 0.0;                            // scoring alone (encoding and forward passes)
  std::vector<ItemScore> per_item;                 // file order

  double items_per_s() const { return seconds > 0 ? static_cast<double>(items) / seconds : 0.0; }
  // acc, acc_norm, their stderr and [lo, hi] at 1.96 stderr, items, chance, ...; `per_item` adds the items.
  nlohmann::json to_json(bool per_item) const;
  // The figures as metrics.jsonl and results.json carry them: "bench/<name>/acc", ...
  nlohmann::json metrics() const;
};

// Scores every choice of every item of `benchmark` with `model` (eval mode, no gradients; its mode is
// restored), `rows_per_batch` pairs per forward pass, padded on the right and masked with key_valid.
// Throws DataError naming the file and line of a choice that encodes to no token or to more than
// model.max_seq_len tokens.
BenchmarkReport score_benchmark(Transformer& model, const Benchmark& benchmark, const Tokenizer& tokenizer,
                                int64_t rows_per_batch, const c10::Device& device);

// "bench/<name>/<figure>", the key of a benchmark figure in metrics rows and results.json.
std::string benchmark_key(const std::string& name, const std::string& figure);
// The benchmarks a metrics row or results.json carries (by their "bench/<name>/acc" keys), in key order.
std::vector<std::string> benchmark_names(const nlohmann::json& row);

// One line per benchmark: items, acc and acc_norm with their 95% intervals, chance, items/s.
std::string format_benchmark_table(const std::vector<BenchmarkReport>& reports);
// The same lines from the flat keys of a metrics row or results.json.
std::string format_benchmark_lines(const nlohmann::json& results);

}  // namespace causal
