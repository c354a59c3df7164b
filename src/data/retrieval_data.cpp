// Generation of the associative-retrieval data set.
#include "data/retrieval_data.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <string>

#include "core/errors.h"

namespace causal {
namespace {

struct Example {
  std::vector<int64_t> keys;    // context keys then the query key
  std::vector<int64_t> values;  // context values then the mask symbol
  int64_t answer = 0;
  int64_t evidence = 0;
  int64_t distractors = 0;
};

// data.query "latest": the queried key occurs twice, at context indices stale < evidence, with different
// values; the answer is the later one's. The other records have distinct keys of their own.
Example draw_latest_example(const DataConfig& data, int64_t pairs, at::Generator& gen) {
  Example ex;
  ex.distractors = data.distractors > 0 ? draw_below(data.distractors + 1, gen) : 0;
  const int64_t context = pairs + ex.distractors;
  at::Tensor keys = at::randperm(data.key_count, gen, at::kLong).slice(0, 0, context - 1);
  at::Tensor values = at::randint(data.value_count, {context}, gen, at::kLong);
  int64_t stale = 0;
  if (data.evidence == EvidencePosition::kFixed) {
    ex.evidence = data.evidence_index;
    stale = draw_below(ex.evidence, gen);
  } else {
    at::Tensor two = at::randperm(context, gen, at::kLong).slice(0, 0, 2);  // a uniform pair of indices
    stale = std::min(two[0].item<int64_t>(), two[1].item<int64_t>());
    ex.evidence = std::max(two[0].item<int64_t>(), two[1].item<int64_t>());
  }
  auto k = keys.accessor<int64_t, 1>();
  auto v = values.accessor<int64_t, 1>();
  // A different value at the stale occurrence, so reading it is always wrong.
  v[stale] = (v[ex.evidence] + 1 + draw_below(data.value_count - 1, gen)) % data.value_count;
  int64_t next_key = 1;  // keys[0] is the queried key
  for (int64_t i = 0; i < context; ++i) {
    ex.keys.push_back(i == stale || i == ex.evidence ? k[0] : k[next_key++]);
    ex.values.push_back(v[i]);
  }
  ex.keys.push_back(k[0]);
  ex.values.push_back(data.value_count);
  ex.answer = v[ex.evidence];
  return ex;
}

Example draw_example(const DataConfig& data, int64_t pairs, at::Generator& gen) {
  if (data.query == QueryMode::kLatest) return draw_latest_example(data, pairs, gen);
  Example ex;
  ex.distractors = data.distractors > 0 ? draw_below(data.distractors + 1, gen) : 0;
  const int64_t context = pairs + ex.distractors;
  // Distinct context keys, independent values: the query key alone never determines the answer.
  at::Tensor keys = at::randperm(data.key_count, gen, at::kLong).slice(0, 0, context);
  at::Tensor values = at::randint(data.value_count, {context}, gen, at::kLong);
  ex.evidence = data.evidence == EvidencePosition::kFixed ? data.evidence_index : draw_below(context, gen);
  auto k = keys.accessor<int64_t, 1>();
  auto v = values.accessor<int64_t, 1>();
  for (int64_t i = 0; i < context; ++i) {
    ex.keys.push_back(k[i]);
    ex.values.push_back(v[i]);
  }
  ex.keys.push_back(k[ex.evidence]);
  ex.values.push_back(data.value_count);  // the mask symbol: the answer never appears at the query
  ex.answer = v[ex.evidence];
  return ex;
}

RetrievalSignature signature_of(const Example& ex) {
  RetrievalSignature sig(ex.keys);
  sig.insert(sig.end(), ex.values.begin(), ex.values.end());
  return sig;
}

}  // namespace

int64_t draw_below(int64_t high, at::Generator& gen) {
  return at::randint(high, {}, gen, at::kLong).item<int64_t>();
}

RetrievalSplit generate_retrieval_split(const DataConfig& data, int64_t pairs, int64_t count, uint64_t seed,
                                        std::set<RetrievalSignature>& seen) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<Example> examples;
  examples.reserve(count);
  // The example space can be smaller than asked for; give up instead of looping forever.
  const int64_t max_draws = 100 * count + 10000;
  int64_t draws = 0;
  while (static_cast<int64_t>(examples.size()) < count) {
    if (++draws > max_draws) {
      throw DataError("[retrieval] could not draw " + std::to_string(count) +
                      " distinct examples with pairs=" + std::to_string(pairs) + " after " +
                      std::to_string(max_draws) +
                      " draws; lower data.train_examples/test_examples or raise key_count/value_count");
    }
    Example ex = draw_example(data, pairs, gen);
    if (!seen.insert(signature_of(ex)).second) continue;
    examples.push_back(std::move(ex));
  }

  const int64_t n = count;
  const int64_t t_max = pairs + data.distractors + 1;
  RetrievalSplit split;
  split.pairs = pairs;
  split.keys = at::zeros({n, t_max}, at::kLong);
  split.values = at::full({n, t_max}, data.value_count, at::kLong);
  split.valid = at::zeros({n, t_max}, at::kBool);
  split.answers = at::empty({n}, at::kLong);
  split.evidence = at::empty({n}, at::kLong);
  split.distractors = at::empty({n}, at::kLong);
  auto keys = split.keys.accessor<int64_t, 2>();
  auto values = split.values.accessor<int64_t, 2>();
  auto valid = split.valid.accessor<bool, 2>();
  auto answers = split.answers.accessor<int64_t, 1>();
  auto evidence = split.evidence.accessor<int64_t, 1>();
  auto distractors = split.distractors.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    const Example& ex = examples[i];
    // Left padding keeps the query at the last position for every row.
    const int64_t pad = t_max - static_cast<int64_t>(ex.keys.size());
    for (size_t j = 0; j < ex.keys.size(); ++j) {
      keys[i][pad + j] = ex.keys[j];
      values[i][pad + j] = ex.values[j];
      valid[i][pad + j] = true;
    }
    answers[i] = ex.answer;
    evidence[i] = ex.evidence;
    distractors[i] = ex.distractors;
  }
  return split;
}

void add_signatures(const RetrievalSplit& split, std::set<RetrievalSignature>& seen) {
  auto keys = split.keys.accessor<int64_t, 2>();
  auto values = split.values.accessor<int64_t, 2>();
  auto valid = split.valid.accessor<bool, 2>();
  for (int64_t i = 0; i < split.size(); ++i) {
    RetrievalSignature sig, vals;
    for (int64_t j = 0; j < split.length(); ++j) {
      if (!valid[i][j]) continue;
      sig.push_back(keys[i][j]);
      vals.push_back(values[i][j]);
    }
    sig.insert(sig.end(), vals.begin(), vals.end());
    seen.insert(std::move(sig));
  }
}

RetrievalSplit query_record_only(const RetrievalSplit& split) {
  RetrievalSplit out = split;
  const int64_t t = split.length();
  out.keys = split.keys.slice(1, t - 1, t).clone();  // (N,1)
  out.values = split.values.slice(1, t - 1, t).clone();
  out.valid = split.valid.slice(1, t - 1, t).clone();
  return out;
}

Batch RetrievalSplit::batch(const at::Tensor& index) const {
  Batch b;
  at::Tensor k = keys.index_select(0, index);  // (B,T)
  at::Tensor v = values.index_select(0, index);
  at::Tensor ok = valid.index_select(0, index);
  b.tokens = at::stack({k, v}, /*dim=*/2);  // (B,T,2)
  // Positions count from the first real record, so padding never shifts a record's position.
  const int64_t t = k.size(1);
  at::Tensor pad = t - ok.sum(1, /*keepdim=*/true);  // (B,1)
  b.positions = (at::arange(t, at::kLong).unsqueeze(0) - pad).clamp_min(0);
  b.key_valid = ok;
  b.labels = at::full({k.size(0), t}, kIgnoreLabel, at::kLong);
  b.labels.select(1, t - 1).copy_(answers.index_select(0, index));
  return b;
}

Batch RetrievalSplit::all() const { return batch(at::arange(size(), at::kLong)); }

RetrievalData build_retrieval_data(const DataConfig& data) {
  RetrievalData out;
  out.value_count = data.value_count;
  out.mask_symbol = data.value_count;
  std::set<RetrievalSignature> seen;
  out.train = generate_retrieval_split(data, data.pairs, data.train_examples, data.seed, seen);
  const size_t train_rows = seen.size();
  out.test = generate_retrieval_split(data, data.pairs, data.test_examples, data.seed + 1, seen);
  // Train and test are disjoint exactly when every test signature was new.
  if (seen.size() != train_rows + static_cast<size_t>(data.test_examples) ||
      train_rows != static_cast<size_t>(data.train_examples)) {
    throw DataError("[retrieval] train/test overlap: " + std::to_string(seen.size()) + " distinct rows for " +
                    std::to_string(data.train_examples) + " train + " + std::to_string(data.test_examples) +
                    " test examples");
  }
  const size_t train_test_rows = seen.size();
  out.val =
      generate_retrieval_split(data, data.pairs, data.val_examples, data.seed + kValidationSeedOffset, seen);
  if (seen.size() != train_test_rows + static_cast<size_t>(data.val_examples)) {
    throw DataError("[retrieval] validation overlaps train or test: " + std::to_string(seen.size()) +
                    " distinct rows for " + std::to_string(train_test_rows) + " train + test and " +
                    std::to_string(data.val_examples) + " validation examples");
  }
  uint64_t seed = data.seed + 2;
  for (int64_t p : data.eval_pairs) {
    std::set<RetrievalSignature> held_out_seen = seen;
    out.held_out[p] = generate_retrieval_split(data, p, data.test_examples, seed++, held_out_seen);
  }
  // The same examples, cut to their query record: the model never sees a context record.
  if (data.query_only) {
    out.train = query_record_only(out.train);
    out.test = query_record_only(out.test);
    out.val = query_record_only(out.val);
    for (auto& [p, split] : out.held_out) split = query_record_only(split);
  }
  return out;
}

}  // namespace causal
