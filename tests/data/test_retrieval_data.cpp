// Contracts of the generated associative-retrieval data.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <set>

#include "config/config.h"
#include "core/errors.h"
#include "data/retrieval_data.h"
#include "data/retrieval_sampler.h"

using namespace causal;

namespace {

std::vector<int64_t> row_of(const at::Tensor& t, int64_t i) {
  at::Tensor r = t[i].contiguous();
  return std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
}

std::set<std::vector<int64_t>> signatures(const RetrievalSplit& s) {
  std::set<std::vector<int64_t>> out;
  for (int64_t i = 0; i < s.size(); ++i) {
    auto k = row_of(s.keys, i), v = row_of(s.values, i);
    k.insert(k.end(), v.begin(), v.end());
    out.insert(k);
  }
  return out;
}

}  // namespace

// Same generator calls as the lab's PyTorch reference: the first rows equal what PyTorch's make_examples
// draws with Generator().manual_seed(120) / (121) (values produced by tools/reference_retrieval.py's
// make_examples).
CATCH_TEST_CASE("retrieval data reproduces the PyTorch lab's examples", "[unit][retrieval]") {
  DataConfig cfg;
  RetrievalData data = build_retrieval_data(cfg);
  CATCH_CHECK(row_of(data.train.keys, 0) == std::vector<int64_t>{7, 1, 2, 0, 0});
  CATCH_CHECK(row_of(data.train.values, 0) == std::vector<int64_t>{0, 4, 1, 4, 8});
  CATCH_CHECK(row_of(data.train.keys, 2) == std::vector<int64_t>{1, 4, 7, 5, 1});
  CATCH_CHECK(row_of(data.train.values, 2) == std::vector<int64_t>{2, 2, 2, 0, 8});
  CATCH_CHECK(row_of(data.train.answers.slice(0, 0, 3).unsqueeze(0), 0) == std::vector<int64_t>{4, 6, 2});
  CATCH_CHECK(row_of(data.test.keys, 1) == std::vector<int64_t>{6, 7, 2, 4, 6});
  CATCH_CHECK(row_of(data.test.values, 1) == std::vector<int64_t>{4, 1, 3, 7, 8});
  CATCH_CHECK(data.test.answers[0].item<int64_t>() == 0);
}

// Train rows are distinct, test rows are distinct, and no test row appears in train.
CATCH_TEST_CASE("retrieval train and test are deduplicated and disjoint", "[unit][retrieval]") {
  DataConfig cfg;
  cfg.key_count = 4;  // 216 possible examples: collisions are frequent, so dedup has work to do
  cfg.value_count = 3;
  cfg.pairs = 2;
  cfg.train_examples = 150;
  cfg.test_examples = 40;
  cfg.val_examples = 20;
  RetrievalData data = build_retrieval_data(cfg);
  auto train = signatures(data.train), test = signatures(data.test), val = signatures(data.val);
  CATCH_REQUIRE(train.size() == 150);
  CATCH_REQUIRE(test.size() == 40);
  CATCH_REQUIRE(val.size() == 20);
  for (const auto& s : test) CATCH_CHECK(train.count(s) == 0);
  // The third split: validation avoids both, so selecting on it never reads a test row.
  for (const auto& s : val) {
    CATCH_CHECK(train.count(s) == 0);
    CATCH_CHECK(test.count(s) == 0);
  }
}

// Adding the validation split left train and test exactly as the lab draws them (generated after both).
CATCH_TEST_CASE("retrieval validation split does not move train or test", "[unit][retrieval]") {
  DataConfig cfg;
  DataConfig fewer = cfg;
  fewer.val_examples = 1;
  const RetrievalData a = build_retrieval_data(cfg), b = build_retrieval_data(fewer);
  CATCH_CHECK(a.train.keys.equal(b.train.keys));
  CATCH_CHECK(a.test.values.equal(b.test.values));
  CATCH_CHECK(a.val.size() == 384);
  CATCH_CHECK(b.val.size() == 1);
}

// data.query "latest": the queried key occurs exactly twice in the context with different values, and the
// answer is the later occurrence's value; order is the only thing that tells the two apart.
CATCH_TEST_CASE("retrieval latest query answers the latest occurrence of a repeated key",
                "[unit][retrieval]") {
  for (EvidencePosition where : {EvidencePosition::kUniform, EvidencePosition::kFixed}) {
    DataConfig cfg;
    cfg.query = QueryMode::kLatest;
    cfg.distractors = 1;
    cfg.evidence = where;
    cfg.evidence_index = 2;
    const RetrievalData data = build_retrieval_data(cfg);
    const RetrievalSplit& s = data.test;
    const int64_t t = s.length();
    std::set<int64_t> stale_positions;
    for (int64_t i = 0; i < s.size(); ++i) {
      const int64_t pad = t - s.valid[i].sum().item<int64_t>();
      const int64_t query = s.keys[i][t - 1].item<int64_t>();
      std::vector<int64_t> hits;
      for (int64_t j = pad; j < t - 1; ++j) {
        if (s.keys[i][j].item<int64_t>() == query) hits.push_back(j - pad);
      }
      CATCH_REQUIRE(hits.size() == 2);
      CATCH_REQUIRE(hits[1] == s.evidence[i].item<int64_t>());
      const int64_t stale = s.values[i][pad + hits[0]].item<int64_t>();
      const int64_t latest = s.values[i][pad + hits[1]].item<int64_t>();
      CATCH_REQUIRE(latest == s.answers[i].item<int64_t>());
      CATCH_REQUIRE(stale != latest);
      // The other context keys are distinct and differ from the queried key.
      std::set<int64_t> others;
      for (int64_t j = pad; j < t - 1; ++j) others.insert(s.keys[i][j].item<int64_t>());
      CATCH_REQUIRE(static_cast<int64_t>(others.size()) == t - 1 - pad - 1);
      stale_positions.insert(hits[0]);
      if (where == EvidencePosition::kFixed) CATCH_REQUIRE(hits[1] == 2);
    }
    CATCH_CHECK(stale_positions.size() >= 2);  // the earlier occurrence moves: not a fixed offset
  }
}

// data.query_only keeps the same examples (answers, groupings) but cuts every row to its query record.
CATCH_TEST_CASE("retrieval query-only rows hold the query record of the same examples", "[unit][retrieval]") {
  DataConfig cfg;
  DataConfig cut = cfg;
  cut.query_only = true;
  const RetrievalData full = build_retrieval_data(cfg), only = build_retrieval_data(cut);
  for (const auto& [a, b] :
       {std::pair{&full.train, &only.train}, {&full.test, &only.test}, {&full.val, &only.val}}) {
    CATCH_REQUIRE(b->length() == 1);
    CATCH_CHECK(b->answers.equal(a->answers));
    CATCH_CHECK(b->keys.select(1, 0).equal(a->keys.select(1, a->length() - 1)));
    CATCH_CHECK(b->values.eq(cfg.value_count).all().item<bool>());
  }
  // The cut rows are the same inputs for every answer: nothing but the key to learn from.
  const auto cut_rows = signatures(only.train);
  CATCH_CHECK(static_cast<int64_t>(cut_rows.size()) == cfg.key_count);
}

// Asking for more examples than exist fails with a clear error instead of looping or repeating rows.
CATCH_TEST_CASE("retrieval generator refuses an impossible example count", "[unit][retrieval]") {
  DataConfig cfg;
  cfg.key_count = 2;
  cfg.value_count = 2;
  cfg.pairs = 1;  // 2 keys x 2 values = 4 distinct examples
  cfg.train_examples = 5;
  CATCH_REQUIRE_THROWS_AS(build_retrieval_data(cfg), DataError);
}

// The answer never appears at the query: its value is the mask symbol, and the answer is the value of
// the earlier record with the query's key.
CATCH_TEST_CASE("retrieval query carries the mask symbol, never the answer", "[unit][retrieval]") {
  DataConfig cfg;
  cfg.distractors = 2;
  cfg.key_count = 10;
  RetrievalData data = build_retrieval_data(cfg);
  const RetrievalSplit& s = data.train;
  const int64_t t = s.length();
  CATCH_REQUIRE(t == cfg.pairs + cfg.distractors + 1);
  for (int64_t i = 0; i < s.size(); ++i) {
    CATCH_REQUIRE(s.values[i][t - 1].item<int64_t>() == cfg.value_count);
    const int64_t pad = t - s.valid[i].sum().item<int64_t>();
    const int64_t column = pad + s.evidence[i].item<int64_t>();
    CATCH_REQUIRE(column < t - 1);
    CATCH_REQUIRE(s.keys[i][column].item<int64_t>() == s.keys[i][t - 1].item<int64_t>());
    CATCH_REQUIRE(s.values[i][column].item<int64_t>() == s.answers[i].item<int64_t>());
    // Context keys are distinct, so the evidence record is the only match.
    CATCH_REQUIRE(s.keys[i].slice(0, pad, t - 1).eq(s.keys[i][t - 1]).sum().item<int64_t>() == 1);
  }
  // Distractor counts vary over 0..2, so rows really are padded differently.
  CATCH_CHECK(s.distractors.min().item<int64_t>() == 0);
  CATCH_CHECK(s.distractors.max().item<int64_t>() == 2);
}

// Batches put the loss only at the final query position, padding is invisible and positions start at the
// first real record.
CATCH_TEST_CASE("retrieval batches label only the query and mask left padding", "[unit][retrieval]") {
  DataConfig cfg;
  cfg.distractors = 1;
  cfg.key_count = 9;
  RetrievalData data = build_retrieval_data(cfg);
  RetrievalSampler sampler(data.train, 16, 7);
  Batch b = sampler.next();
  const int64_t t = b.tokens.size(1);
  CATCH_REQUIRE(b.tokens.sizes() == at::IntArrayRef({16, t, 2}));
  CATCH_CHECK(b.valid_tokens() == 16);
  CATCH_CHECK(b.labels.slice(1, 0, t - 1).eq(kIgnoreLabel).all().item<bool>());
  at::Tensor pad = t - b.key_valid.sum(1);
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t p = pad[i].item<int64_t>();
    CATCH_CHECK(b.positions[i][p].item<int64_t>() == 0);
    CATCH_CHECK(b.positions[i][t - 1].item<int64_t>() == t - 1 - p);
  }
  CATCH_CHECK(pad.max().item<int64_t>() == 1);  // some rows padded, so the check above is not vacuous
}

// Held-out lengths are generated at their own `pairs` and evaluated separately.
CATCH_TEST_CASE("retrieval held-out lengths have their own splits", "[unit][retrieval]") {
  DataConfig cfg;
  cfg.key_count = 12;
  cfg.eval_pairs = {2, 8};
  RetrievalData data = build_retrieval_data(cfg);
  CATCH_REQUIRE(data.held_out.size() == 2);
  CATCH_CHECK(data.held_out.at(2).length() == 3);
  CATCH_CHECK(data.held_out.at(8).length() == 9);
  CATCH_CHECK(data.held_out.at(8).size() == cfg.test_examples);
}
