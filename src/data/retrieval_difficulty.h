// The decoupled-difficulty grid of the retrieval lab (docs/retrieval-lab.md#decoupled-difficulty): rows of a
// fixed context length in which distractor records replace filler records, so length, distractor count
// and evidence position vary independently.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "config/data_config.h"
#include "data/retrieval_data.h"

namespace causal {

struct DifficultySpec {
  std::vector<int64_t> lengths = {4, 8};         // context records per row (the row adds the query)
  std::vector<int64_t> distractors = {0, 1, 3};  // records with a real value and another key
  std::vector<double> depths = {0.0, 0.5, 1.0};  // evidence index = round(depth * (length - 1))
  int64_t rows = 128;                            // examples per cell
};

// One cell: every row has `length` context records; the evidence (queried key, the answer) at index
// `evidence`; `distractors` records with distinct other keys and real values, never the answer's; the
// remaining length - 1 - distractors records are filler: another key and the mask symbol as value (no
// answer candidate). The query record follows.
struct DifficultyCell {
  int64_t length = 0;
  int64_t distractors = 0;
  int64_t evidence = 0;
  RetrievalSplit split;  // (rows, length + 1); pairs = length, distractors tensor = the cell's count
};

// Every feasible cell (distractors <= length - 1 and <= key_count - 1; duplicate evidence indices of one
// length dropped), in the order lengths x distractors x depths. Rows are distinct and avoid `seen` (pass
// the train/test/validation signatures); generator seed `seed`, one stream for the whole grid.
// data.query_only cuts the rows to the query record. Throws DataError when a cell cannot be filled.
std::vector<DifficultyCell> generate_difficulty_grid(const DataConfig& data, const DifficultySpec& spec,
                                                     uint64_t seed, std::set<RetrievalSignature> seen);

}  // namespace causal
