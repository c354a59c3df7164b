// The retrieval studies' machinery: the decoupled-difficulty grid (each cell holds what its coordinates
// say, and scoring gives each cell the accuracy a constructed oracle must have there) and the validation
// split of periodic evaluation.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "config/config_io.h"
#include "data/retrieval_difficulty.h"
#include "task/retrieval_difficulty_eval.h"
#include "task/task.h"

using namespace causal;

namespace {

DifficultySpec small_spec() {
  DifficultySpec spec;
  spec.lengths = {4, 8};
  spec.distractors = {0, 2, 5};
  spec.depths = {0.0, 0.5, 1.0};
  spec.rows = 40;
  return spec;
}

constexpr int64_t kMask = 8;  // value_count of the default data: the mask symbol

// Oracles over a cell's batch (B, L+1, 2): each returns the predicted value per row, or -1 (never right).
// `accept(j, context_length, row)` says whether the oracle reads context record j of that row.
template <class Accept>
at::Tensor key_match_oracle(const Batch& batch, Accept accept) {
  const int64_t n = batch.tokens.size(0), t = batch.tokens.size(1);
  at::Tensor out = at::full({n}, -1, at::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t query = batch.tokens[i][t - 1][0].item<int64_t>();
    for (int64_t j = 0; j < t - 1; ++j) {
      const int64_t key = batch.tokens[i][j][0].item<int64_t>(),
                    value = batch.tokens[i][j][1].item<int64_t>();
      if (key == query && value != kMask && accept(j, t - 1, i)) out[i] = value;
    }
  }
  return out;
}

// Records holding a real value, the query excluded.
int64_t valued_records(const Batch& batch, int64_t row) {
  const int64_t t = batch.tokens.size(1);
  return batch.tokens[row].slice(0, 0, t - 1).select(1, 1).ne(kMask).sum().item<int64_t>();
}

}  // namespace

// Every cell holds exactly its coordinates: `length` context records, the evidence (queried key, answer)
// at index `evidence`, `distractors` records with distinct other keys and wrong values, the rest filler
// (another key, no value). Guards the grid's figures against meaning something other than their labels.
CATCH_TEST_CASE("difficulty grid cells hold their length, distractor count and evidence position",
                "[unit][retrieval]") {
  DataConfig data;
  std::set<RetrievalSignature> seen;
  const auto cells = generate_difficulty_grid(data, small_spec(), 7, seen);
  // length 4 admits distractors 0 and 2 (5 > 3), evidence 0, 2 (round(1.5)), 3; length 8 all three counts
  // with evidence 0, 4 (round(3.5)), 7.
  CATCH_REQUIRE(cells.size() == 2 * 3 + 3 * 3);
  std::set<std::vector<int64_t>> rows;
  for (const DifficultyCell& cell : cells) {
    const RetrievalSplit& s = cell.split;
    CATCH_REQUIRE(s.length() == cell.length + 1);
    CATCH_REQUIRE(s.size() == 40);
    for (int64_t i = 0; i < s.size(); ++i) {
      const int64_t query = s.keys[i][cell.length].item<int64_t>();
      CATCH_REQUIRE(s.values[i][cell.length].item<int64_t>() == kMask);
      CATCH_REQUIRE(s.keys[i][cell.evidence].item<int64_t>() == query);
      CATCH_REQUIRE(s.values[i][cell.evidence].item<int64_t>() == s.answers[i].item<int64_t>());
      int64_t distractors = 0;
      std::set<int64_t> distractor_keys;
      for (int64_t j = 0; j < cell.length; ++j) {
        if (j == cell.evidence) continue;
        CATCH_REQUIRE(s.keys[i][j].item<int64_t>() != query);
        const int64_t v = s.values[i][j].item<int64_t>();
        if (v == kMask) continue;  // filler
        ++distractors;
        CATCH_REQUIRE(v != s.answers[i].item<int64_t>());
        distractor_keys.insert(s.keys[i][j].item<int64_t>());
      }
      CATCH_REQUIRE(distractors == cell.distractors);
      CATCH_REQUIRE(static_cast<int64_t>(distractor_keys.size()) == cell.distractors);
      std::vector<int64_t> sig;
      for (int64_t j = 0; j <= cell.length; ++j) {
        sig.push_back(s.keys[i][j].item<int64_t>());
        sig.push_back(s.values[i][j].item<int64_t>());
      }
      CATCH_REQUIRE(rows.insert(sig).second);  // deduplicated across the whole grid
    }
  }
  CATCH_CHECK(cells.front().evidence == 0);
  CATCH_CHECK(cells[1].evidence == 2);
}

// Scoring assigns each cell its own accuracy. Oracles whose accuracy per cell is known exactly:
// a key matcher (1 everywhere), one that reads only context index 0 (1 iff evidence 0), one that reads only
// the last 2 records (1 iff evidence >= length - 2), and one that gives up when any distractor is present
// (1 iff distractors 0). Together they pin all three axes of the breakdown.
CATCH_TEST_CASE("difficulty scoring gives each cell the accuracy its oracle must have", "[unit][retrieval]") {
  DataConfig data;
  const auto cells = generate_difficulty_grid(data, small_spec(), 9, {});
  const auto score = [&](const AnswerPredictor& predict) {
    std::map<std::vector<int64_t>, double> out;
    const nlohmann::json scored = score_difficulty_grid(cells, predict);
    for (const auto& c : scored["cells"]) {
      out[{c["length"].get<int64_t>(), c["distractors"].get<int64_t>(), c["evidence"].get<int64_t>()}] =
          c["accuracy"].get<double>();
      CATCH_CHECK(c["count"].get<int64_t>() == 40);
    }
    return out;
  };
  const auto everywhere = score(
      [](const Batch& b) { return key_match_oracle(b, [](int64_t, int64_t, int64_t) { return true; }); });
  const auto first = score(
      [](const Batch& b) { return key_match_oracle(b, [](int64_t j, int64_t, int64_t) { return j == 0; }); });
  const auto recent = score([](const Batch& b) {
    return key_match_oracle(b, [](int64_t j, int64_t length, int64_t) { return j >= length - 2; });
  });
  const auto no_distractors = score([](const Batch& b) {
    return key_match_oracle(b, [&b](int64_t, int64_t, int64_t row) { return valued_records(b, row) == 1; });
  });
  CATCH_REQUIRE(everywhere.size() == cells.size());
  for (const auto& [cell, accuracy] : everywhere) {
    const int64_t length = cell[0], distractors = cell[1], evidence = cell[2];
    CATCH_CHECK(accuracy == 1.0);
    CATCH_CHECK(first.at(cell) == (evidence == 0 ? 1.0 : 0.0));
    CATCH_CHECK(recent.at(cell) == (evidence >= length - 2 ? 1.0 : 0.0));
    CATCH_CHECK(no_distractors.at(cell) == (distractors == 0 ? 1.0 : 0.0));
  }
}

// Periodic evaluation reads the validation split; the final figures add the test split beside it.
CATCH_TEST_CASE("retrieval periodic evaluation scores the validation split", "[unit][task]") {
  RunConfig config = load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json");
  const auto task = make_task(config, torch::kCPU, TaskScope::kEvaluation);
  torch::manual_seed(3);
  Transformer model(config.model);
  const nlohmann::json val = task->evaluate_validation(model);
  CATCH_CHECK(val.contains("val_accuracy"));
  CATCH_CHECK(val.contains("val_loss"));
  CATCH_CHECK_FALSE(val.contains("test_accuracy"));
  const nlohmann::json all = task->evaluate(model);
  CATCH_CHECK(all.contains("test_accuracy"));
  CATCH_CHECK(all["val_loss"] == val["val_loss"]);
  // Different rows, so (for an untrained model) different losses: the two are not one split under two names.
  CATCH_CHECK(all["val_loss"].get<double>() != all["test_loss"].get<double>());
}
