// Multiple-choice scoring against a naive reference: each pair run alone, unpadded, its log-probabilities
// summed in double here; batching, padding and the left cut must not change a figure.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "config/config.h"
#include "core/errors.h"
#include "data/benchmark_file.h"
#include "data/tokenizer.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "task/benchmark_eval.h"

using namespace causal;

namespace {

ModelConfig byte_model(int64_t max_seq_len) {
  ModelConfig m = testing::small_byte_model(PositionKind::kRope, max_seq_len);
  m.init_std = 0.3;  // large weights: choices differ by whole nats, so argmaxes are not decided by rounding
  return m;
}

// The reference: [BOS] + bytes of context (trailing spaces kept with the choice) + " " + choice, the last
// max_len + 1 ids without the last one, run as one row; the choice's ids scored in double.
double reference_logprob(Transformer& model, const std::string& context, const std::string& choice,
                         int64_t max_len) {
  size_t kept = context.size();
  while (kept > 0 && context[kept - 1] == ' ') --kept;
  std::vector<int64_t> ids = {256};
  for (size_t i = 0; i < kept; ++i) ids.push_back(static_cast<unsigned char>(context[i]));
  const size_t context_ids = ids.size();
  const std::string continuation = context.substr(kept) + " " + choice;
  for (unsigned char c : continuation) ids.push_back(c);
  const size_t start = ids.size() > static_cast<size_t>(max_len) + 1 ? ids.size() - max_len - 1 : 0;
  std::vector<int64_t> window(ids.begin() + start, ids.end() - 1);
  torch::NoGradGuard no_grad;
  ModelInputs in;
  in.tokens = torch::tensor(window, torch::kLong).view({1, -1, 1});
  const torch::Tensor logp = model->forward(in).logits[0].to(torch::kDouble).log_softmax(-1);  // (T,V)
  double sum = 0.0;
  for (size_t j = context_ids; j < ids.size(); ++j)
    sum += logp[static_cast<int64_t>(j - 1 - start)][ids[j]].item<double>();
  return sum;
}

}  // namespace

CATCH_TEST_CASE(
    "benchmark scoring: summed choice log-probabilities, acc and acc_norm as lm-eval computes them",
    "[unit][benchmark]") {
  torch::manual_seed(3);
  const int64_t max_len = 24;
  Transformer model(byte_model(max_len));
  model->eval();
  Benchmark bench;
  bench.name = "toy";
  bench.path = "toy.jsonl";
  // Contexts with trailing spaces, an empty one, ones longer than the window, a non-ASCII choice.
  bench.items = {
      {"The cat sat on the", {"mat.", "moon and the stars.", "dog"}, 0, 1},
      {"", {"Hello there", "x"}, 1, 2},
      {"A long context that does not fit into twenty-four positions at all, ",
       {"so it is cut", "caf\u00e9"},
       1,
       3},
      {"Two spaces  ", {"a", "bb", "ccc", "dddd"}, 3, 4},
      {"Numbers: 1 2 3", {"4 5", "9 9", "three"}, 0, 5},
      {"Short", {"one", "two", "three", "four", "five"}, 2, 6},
  };
  const ByteTokenizer bytes;
  const BenchmarkReport report = score_benchmark(model, bench, bytes, /*rows_per_batch=*/1, torch::kCPU);
  CATCH_REQUIRE(report.items == 6);
  CATCH_CHECK(report.choices == 19);
  double hits = 0, norm_hits = 0, chance = 0;
  for (size_t i = 0; i < bench.items.size(); ++i) {
    const BenchmarkItem& item = bench.items[i];
    const ItemScore& score = report.per_item[i];
    CATCH_REQUIRE(score.logprobs.size() == item.choices.size());
    std::vector<double> reference, per_char;
    for (size_t c = 0; c < item.choices.size(); ++c) {
      reference.push_back(reference_logprob(model, item.context, item.choices[c], max_len));
      CATCH_CHECK(std::abs(score.logprobs[c] - reference.back()) < 1e-4);
      // Python's len(): "café" is four characters, five bytes.
      const double characters =
          item.choices[c] == "caf\u00e9" ? 4.0 : static_cast<double>(item.choices[c].size());
      per_char.push_back(reference.back() / characters);
    }
    const auto best = [](const std::vector<double>& v) {
      return std::max_element(v.begin(), v.end()) - v.begin();
    };
    CATCH_CHECK(score.predicted == best(reference));
    CATCH_CHECK(score.predicted_norm == best(per_char));
    hits += score.predicted == item.answer;
    norm_hits += score.predicted_norm == item.answer;
    chance += 1.0 / static_cast<double>(item.choices.size());
  }
  const double n = 6.0;
  CATCH_CHECK(report.acc == Approx(hits / n));
  CATCH_CHECK(report.acc_norm == Approx(norm_hits / n));
  CATCH_CHECK(report.chance == Approx(chance / n));
  // lm-eval's mean_stderr of 0/1 outcomes: sqrt(p (1 - p) n / (n - 1)) / sqrt(n).
  const double p = hits / n;
  CATCH_CHECK(report.acc_stderr == Approx(std::sqrt(p * (1 - p) * n / (n - 1)) / std::sqrt(n)));
  CATCH_CHECK(report.truncated_choices == 3);  // " moon and the stars." after "The cat...", and item 3 whole
  // Rows of different lengths in one batch: padding and the key_valid mask change nothing.
  const BenchmarkReport batched = score_benchmark(model, bench, bytes, /*rows_per_batch=*/7, torch::kCPU);
  double worst = 0.0;
  for (size_t i = 0; i < bench.items.size(); ++i) {
    for (size_t c = 0; c < bench.items[i].choices.size(); ++c)
      worst = std::max(worst, std::abs(batched.per_item[i].logprobs[c] - report.per_item[i].logprobs[c]));
  }
  CATCH_CHECK(worst < 1e-4);
  CATCH_CHECK(batched.acc == report.acc);
  CATCH_CHECK(batched.acc_norm == report.acc_norm);

  const nlohmann::json metrics = report.metrics();
  CATCH_CHECK(metrics.at("bench/toy/acc") == report.acc);
  CATCH_CHECK(benchmark_names(metrics) == std::vector<std::string>{"toy"});
  const nlohmann::json j = report.to_json(true);
  CATCH_CHECK(j.at("acc_ci95")[0].get<double>() == Approx(report.acc - 1.96 * report.acc_stderr));
  CATCH_CHECK(j.at("per_item").size() == 6);
}

CATCH_TEST_CASE("benchmark scoring: a choice longer than the model's context is refused by file and line",
                "[unit][benchmark]") {
  torch::manual_seed(1);
  Transformer model(byte_model(8));
  Benchmark bench;
  bench.name = "long";
  bench.path = "long.jsonl";
  bench.items = {{"ctx", {"short", "a choice of many bytes"}, 0, 7}};
  try {
    score_benchmark(model, bench, ByteTokenizer(), 4, torch::kCPU);
    CATCH_FAIL("expected a DataError");
  } catch (const DataError& e) {
    CATCH_CHECK(std::string(e.what()) ==
                "[benchmark] long.jsonl:7: choice 1 is 23 tokens, more than model.max_seq_len 8: the choice "
                "itself must fit the model's context");
  }
}
