// Generation of the decoupled-difficulty grid (see retrieval_difficulty.h).
#include "data/retrieval_difficulty.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>

#include "core/errors.h"

namespace causal {
namespace {

// One row of the cell as (keys, values) over length + 1 positions, the query last.
RetrievalSignature draw_row(const DataConfig& data, int64_t length, int64_t distractors, int64_t evidence,
                            at::Generator& gen, int64_t& answer) {
  const int64_t mask = data.value_count;
  at::Tensor keys = at::randperm(data.key_count, gen, at::kLong);  // keys[0] queried, then distractors'
  auto k = keys.accessor<int64_t, 1>();
  answer = draw_below(data.value_count, gen);
  // Which non-evidence indices hold distractors: the first `distractors` of a permutation of them.
  at::Tensor order = at::randperm(length - 1, gen, at::kLong);
  auto o = order.accessor<int64_t, 1>();
  std::vector<bool> is_distractor(length, false);
  for (int64_t j = 0; j < distractors; ++j) {
    const int64_t slot = o[j];
    is_distractor[slot < evidence ? slot : slot + 1] = true;
  }
  std::vector<int64_t> row_keys(length + 1), row_values(length + 1);
  int64_t next_distractor = 1;
  for (int64_t i = 0; i < length; ++i) {
    if (i == evidence) {
      row_keys[i] = k[0];
      row_values[i] = answer;
    } else if (is_distractor[i]) {
      row_keys[i] = k[next_distractor++];
      // Any value but the answer: reading a distractor is always wrong.
      row_values[i] = (answer + 1 + draw_below(data.value_count - 1, gen)) % data.value_count;
    } else {
      // Filler: any key but the queried one (repeats allowed), and no value.
      row_keys[i] = k[1 + draw_below(data.key_count - 1, gen)];
      row_values[i] = mask;
    }
  }
  row_keys[length] = k[0];
  row_values[length] = mask;
  RetrievalSignature sig(row_keys);
  sig.insert(sig.end(), row_values.begin(), row_values.end());
  return sig;
}

DifficultyCell make_cell(const DataConfig& data, int64_t length, int64_t distractors, int64_t evidence,
                         int64_t rows, at::Generator& gen, std::set<RetrievalSignature>& seen) {
  DifficultyCell cell{length, distractors, evidence, {}};
  RetrievalSplit& split = cell.split;
  split.pairs = length;
  split.keys = at::empty({rows, length + 1}, at::kLong);
  split.values = at::empty({rows, length + 1}, at::kLong);
  split.valid = at::ones({rows, length + 1}, at::kBool);
  split.answers = at::empty({rows}, at::kLong);
  split.evidence = at::full({rows}, evidence, at::kLong);
  split.distractors = at::full({rows}, distractors, at::kLong);
  auto keys = split.keys.accessor<int64_t, 2>();
  auto values = split.values.accessor<int64_t, 2>();
  auto answers = split.answers.accessor<int64_t, 1>();
  const int64_t max_draws = 100 * rows + 10000;
  int64_t draws = 0;
  for (int64_t r = 0; r < rows;) {
    if (++draws > max_draws) {
      throw DataError("[difficulty] could not draw " + std::to_string(rows) + " distinct rows for length " +
                      std::to_string(length) + ", " + std::to_string(distractors) +
                      " distractors, evidence " + std::to_string(evidence) + "; lower --rows");
    }
    int64_t answer = 0;
    RetrievalSignature sig = draw_row(data, length, distractors, evidence, gen, answer);
    if (!seen.insert(sig).second) continue;
    for (int64_t i = 0; i <= length; ++i) {
      keys[r][i] = sig[i];
      values[r][i] = sig[length + 1 + i];
    }
    answers[r] = answer;
    ++r;
  }
  if (data.query_only) split = query_record_only(split);
  return cell;
}

}  // namespace

std::vector<DifficultyCell> generate_difficulty_grid(const DataConfig& data, const DifficultySpec& spec,
                                                     uint64_t seed, std::set<RetrievalSignature> seen) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<DifficultyCell> cells;
  for (int64_t length : spec.lengths) {
    for (int64_t distractors : spec.distractors) {
      if (distractors > length - 1 || distractors > data.key_count - 1) continue;
      std::set<int64_t> evidence_done;
      for (double depth : spec.depths) {
        const int64_t evidence = std::llround(depth * static_cast<double>(length - 1));
        if (!evidence_done.insert(evidence).second) continue;
        cells.push_back(make_cell(data, length, distractors, evidence, spec.rows, gen, seen));
      }
    }
  }
  return cells;
}

}  // namespace causal
