// Multiple-choice scoring: every (item, choice) pair is one row; rows of similar length share a forward pass.
#include "task/benchmark_eval.h"

#include <ATen/ATen.h>
#include <spdlog/fmt/fmt.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/errors.h"
#include "data/choice_encoding.h"
#include "data/python_text.h"

namespace causal {
namespace {

constexpr double kZ95 = 1.96;  // two-sided 95% normal quantile
constexpr const char* kPrefix = "bench/";

// One choice of one item, as the model reads it.
struct Pair {
  size_t item = 0, choice = 0;
  ChoiceWindow window;
  std::vector<int64_t> continuation;
};

// lm-eval's mean_stderr: sample standard deviation (n - 1) over sqrt(n); NaN below two items.
double mean_stderr(const std::vector<double>& values) {
  const double n = static_cast<double>(values.size());
  if (values.size() < 2) return NAN;
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double squares = 0.0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / (n - 1.0)) / std::sqrt(n);
}

// The first index of the largest value, as numpy's argmax.
int64_t argmax(const std::vector<double>& values) {
  return std::max_element(values.begin(), values.end()) - values.begin();
}

std::vector<Pair> encode_pairs(const Benchmark& benchmark, const Tokenizer& tokenizer, int64_t max_seq_len) {
  std::vector<Pair> pairs;
  for (size_t i = 0; i < benchmark.items.size(); ++i) {
    const BenchmarkItem& item = benchmark.items[i];
    for (size_t c = 0; c < item.choices.size(); ++c) {
      const ChoiceTokens tokens = encode_choice(tokenizer, item.context, kChoiceDelimiter + item.choices[c]);
      const std::string where =
          "[benchmark] " + benchmark.path + ":" + std::to_string(item.line) + ": choice " + std::to_string(c);
      if (tokens.continuation.empty())
        throw DataError(where + " encodes to no token of its own (the tokenizer merges it into the context)");
      if (static_cast<int64_t>(tokens.continuation.size()) > max_seq_len) {
        throw DataError(where + " is " + std::to_string(tokens.continuation.size()) +
                        " tokens, more than model.max_seq_len " + std::to_string(max_seq_len) +
                        ": the choice itself must fit the model's context");
      }
      pairs.push_back({i, c, choice_window(tokens, max_seq_len), tokens.continuation});
    }
  }
  return pairs;
}

// Sums each pair's continuation log-probabilities from one padded forward pass over `rows` (indices into
// `pairs`); the sums go to sums[row index].
void score_rows(Transformer& model, const std::vector<Pair>& pairs, const std::vector<size_t>& rows,
                int64_t pad_id, const c10::Device& device, std::vector<double>& sums) {
  const int64_t b = static_cast<int64_t>(rows.size());
  int64_t t = 0;
  for (size_t r : rows) t = std::max<int64_t>(t, static_cast<int64_t>(pairs[r].window.inputs.size()));
  at::Tensor tokens = at::full({b, t}, pad_id, at::kLong);  // (B,T)
  at::Tensor valid = at::zeros({b, t}, at::kBool);          // (B,T)
  std::vector<int64_t> row_index, position, label;          // one entry per scored position
  auto tokens_a = tokens.accessor<int64_t, 2>();
  auto valid_a = valid.accessor<bool, 2>();
  bool padded = false;
  for (int64_t row = 0; row < b; ++row) {
    const Pair& pair = pairs[rows[row]];
    const auto length = static_cast<int64_t>(pair.window.inputs.size());
    padded |= length < t;
    for (int64_t p = 0; p < length; ++p) {
      tokens_a[row][p] = pair.window.inputs[p];
      valid_a[row][p] = true;
    }
    // The window's last positions predict the continuation, one id each.
    const auto scored = static_cast<int64_t>(pair.continuation.size());
    for (int64_t j = 0; j < scored; ++j) {
      row_index.push_back(row);
      position.push_back(length - scored + j);
      label.push_back(pair.continuation[j]);
    }
  }
  ModelInputs inputs;
  inputs.tokens = tokens.unsqueeze(2).to(device);  // (B,T,1)
  // Right padding never changes an earlier position under the causal mask; the mask keeps it out all the
  // same.
  if (padded) inputs.key_valid = valid.to(device);
  const at::Tensor logits = model->forward(inputs).logits;  // (B,T,V)
  std::vector<int64_t> flat(row_index.size());
  for (size_t n = 0; n < flat.size(); ++n) flat[n] = row_index[n] * t + position[n];
  const auto ids = [&](const std::vector<int64_t>& v) { return at::tensor(v, at::kLong).to(device); };
  const at::Tensor picked =
      logits.reshape({b * t, logits.size(-1)}).index_select(0, ids(flat)).to(at::kFloat);        // (N,V)
  const at::Tensor logp = picked.log_softmax(-1).gather(1, ids(label).unsqueeze(1)).squeeze(1);  // (N)
  const at::Tensor values = logp.to(at::kCPU, at::kDouble).contiguous();
  const double* v = values.data_ptr<double>();
  for (size_t n = 0; n < row_index.size(); ++n) sums[rows[row_index[n]]] += v[n];
}

std::string interval(double value, double stderr) {
  if (!std::isfinite(stderr)) return fmt::format("{:.4f}", value);
  return fmt::format("{:.4f} \u00b1 {:.4f}", value, kZ95 * stderr);
}

double number(const nlohmann::json& row, const std::string& key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : NAN;
}

}  // namespace

nlohmann::json BenchmarkReport::to_json(bool with_items) const {
  const auto ci = [](double value, double stderr) {
    return std::isfinite(stderr) ? nlohmann::json::array({value - kZ95 * stderr, value + kZ95 * stderr})
                                 : nlohmann::json(nullptr);
  };
  nlohmann::json j = {{"file", path},
                      {"items", items},
                      {"choices", choices},
                      {"acc", acc},
                      {"acc_stderr", acc_stderr},
                      {"acc_ci95", ci(acc, acc_stderr)},
                      {"acc_norm", acc_norm},
                      {"acc_norm_stderr", acc_norm_stderr},
                      {"acc_norm_ci95", ci(acc_norm, acc_norm_stderr)},
                      {"chance", chance},
                      {"truncated_choices", truncated_choices},
                      {"seconds", seconds},
                      {"items_per_s", items_per_s()}};
  if (with_items) {
    nlohmann::json list = nlohmann::json::array();
    for (const ItemScore& s : per_item) {
      list.push_back({{"line", s.line},
                      {"answer", s.answer},
                      {"pred", s.predicted},
                      {"pred_norm", s.predicted_norm},
                      {"logprobs", s.logprobs}});
    }
    j["per_item"] = std::move(list);
  }
  return j;
}

nlohmann::json BenchmarkReport::metrics() const {
  return {{benchmark_key(name, "acc"), acc},
          {benchmark_key(name, "acc_stderr"), acc_stderr},
          {benchmark_key(name, "acc_norm"), acc_norm},
          {benchmark_key(name, "acc_norm_stderr"), acc_norm_stderr},
          {benchmark_key(name, "items"), items},
          {benchmark_key(name, "chance"), chance},
          {benchmark_key(name, "items_per_s"), items_per_s()}};
}

BenchmarkReport score_benchmark(Transformer& model, const Benchmark& benchmark, const Tokenizer& tokenizer,
                                int64_t rows_per_batch, const c10::Device& device) {
  TORCH_CHECK(rows_per_batch >= 1, "[benchmark] rows_per_batch must be >= 1, got ", rows_per_batch);
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Pair> pairs = encode_pairs(benchmark, tokenizer, model->config().max_seq_len);
  // Longest first, as lm-eval orders them: rows of one batch have similar lengths, so little padding.
  std::vector<size_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return pairs[a].window.inputs.size() > pairs[b].window.inputs.size();
  });
  std::vector<double> sums(pairs.size(), 0.0);
  for (size_t begin = 0; begin < order.size(); begin += static_cast<size_t>(rows_per_batch)) {
    const size_t end = std::min(order.size(), begin + static_cast<size_t>(rows_per_batch));
    score_rows(model, pairs, std::vector<size_t>(order.begin() + begin, order.begin() + end),
               tokenizer.info().pad_id, device, sums);
  }
  if (was_training) model->train();

  BenchmarkReport report;
  report.name = benchmark.name;
  report.path = benchmark.path;
  report.items = static_cast<int64_t>(benchmark.items.size());
  report.choices = static_cast<int64_t>(pairs.size());
  for (auto& item : benchmark.items) report.per_item.push_back({item.line, item.answer, {}, 0, 0});
  for (size_t p = 0; p < pairs.size(); ++p) {
    report.per_item[pairs[p].item].logprobs.push_back(sums[p]);
    report.truncated_choices += pairs[p].window.truncated ? 1 : 0;
  }
  std::vector<double> hits, norm_hits;
  for (size_t i = 0; i < benchmark.items.size(); ++i) {
    ItemScore& score = report.per_item[i];
    const BenchmarkItem& item = benchmark.items[i];
    std::vector<double> per_character;
    for (size_t c = 0; c < item.choices.size(); ++c)
      per_character.push_back(score.logprobs[c] / static_cast<double>(code_points(item.choices[c])));
    score.predicted = argmax(score.logprobs);
    score.predicted_norm = argmax(per_character);
    hits.push_back(score.predicted == item.answer ? 1.0 : 0.0);
    norm_hits.push_back(score.predicted_norm == item.answer ? 1.0 : 0.0);
    report.chance += 1.0 / static_cast<double>(item.choices.size());
  }
  const double n = static_cast<double>(report.items);
  report.acc = std::accumulate(hits.begin(), hits.end(), 0.0) / n;
  report.acc_norm = std::accumulate(norm_hits.begin(), norm_hits.end(), 0.0) / n;
  report.acc_stderr = mean_stderr(hits);
  report.acc_norm_stderr = mean_stderr(norm_hits);
  report.chance /= n;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::string benchmark_key(const std::string& name, const std::string& figure) {
  return kPrefix + name + "/" + figure;
}

std::vector<std::string> benchmark_names(const nlohmann::json& row) {
  std::vector<std::string> names;
  if (!row.is_object()) return names;
  const std::string suffix = "/acc";
  for (const auto& item : row.items()) {
    const std::string& key = item.key();
    if (key.rfind(kPrefix, 0) == 0 && key.size() > std::string(kPrefix).size() + suffix.size() &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(
          key.substr(std::string(kPrefix).size(), key.size() - std::string(kPrefix).size() - suffix.size()));
    }
  }
  return names;
}

std::string format_benchmark_table(const std::vector<BenchmarkReport>& reports) {
  nlohmann::json all = nlohmann::json::object();
  for (const BenchmarkReport& r : reports) all.update(r.metrics());
  return format_benchmark_lines(all);
}

std::string format_benchmark_lines(const nlohmann::json& results) {
  const std::vector<std::string> names = benchmark_names(results);
  if (names.empty()) return "";
  std::string out = "benchmarks (acc, acc_norm: 95% intervals, 1.96 stderr)\n";
  for (const std::string& name : names) {
    const auto get = [&](const char* figure) { return number(results, benchmark_key(name, figure)); };
    out += fmt::format("  {:<24} n={:<6.0f} acc {:<17} acc_norm {:<17} chance {:.4f}  {:.1f} items/s\n", name,
                       get("items"), interval(get("acc"), get("acc_stderr")),
                       interval(get("acc_norm"), get("acc_norm_stderr")), get("chance"), get("items_per_s"));
  }
  return out;
}

}  // namespace causal
