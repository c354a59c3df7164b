// The associative-retrieval task of the lab (docs/retrieval-lab.md): context key/value records, then a query
// record whose answer is the value paired with the query key earlier in the sequence. Generated,
// deduplicated, and with train and test provably disjoint.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "config/data_config.h"
#include "data/batch.h"

namespace causal {

// N examples of one context length family. Rows are left-padded to the longest example so the query is
// always the last position; field 0 is the key id, field 1 the value id (value_count = mask symbol).
struct RetrievalSplit {
  at::Tensor keys;         // (N,T) int64; padding uses key 0
  at::Tensor values;       // (N,T) int64; padding and the query use the mask symbol
  at::Tensor valid;        // (N,T) bool: false on left padding
  at::Tensor answers;      // (N) int64: the value the query asks for
  at::Tensor evidence;     // (N) int64: index of the queried record among the context records
  at::Tensor distractors;  // (N) int64: context records beyond `pairs` in this example
  int64_t pairs = 0;       // `pairs` this split was generated with

  int64_t size() const { return answers.size(0); }
  int64_t length() const { return keys.size(1); }
  // Rows `index` as a batch: loss only at the final (query) position.
  Batch batch(const at::Tensor& index) const;
  Batch all() const;
};

struct RetrievalData {
  RetrievalSplit train;
  RetrievalSplit test;
  RetrievalSplit val;  // selection and periodic evaluation; disjoint from train and test
  std::map<int64_t, RetrievalSplit> held_out;  // eval_pairs -> test split at that length
  int64_t value_count = 0;
  int64_t mask_symbol = 0;
};

// A row's identity for deduplication: the full key and value rows, padding excluded.
using RetrievalSignature = std::vector<int64_t>;

// Draws `count` examples whose signatures are not yet in `seen`, adding theirs to it. With no
// distractors and uniform evidence the draws follow the lab's PyTorch generator
// (tools/reference_retrieval.py) call for call. Throws DataError when the space of examples is too small to
// find that many.
RetrievalSplit generate_retrieval_split(const DataConfig& data, int64_t pairs, int64_t count, uint64_t seed,
                                        std::set<RetrievalSignature>& seen);

// Generator seed of the validation split, data.seed + this: far from the held-out lengths' seed + 2, + 3, ...
constexpr uint64_t kValidationSeedOffset = 1000;

// A uniform draw from 0 .. high-1, the call the lab's generator makes (torch.randint(high, ())).
int64_t draw_below(int64_t high, at::Generator& gen);

// Adds the signature of every row of `split` to `seen` (padding excluded).
void add_signatures(const RetrievalSplit& split, std::set<RetrievalSignature>& seen);

// The split with every row cut to its last (query) column; answers and groupings unchanged.
RetrievalSplit query_record_only(const RetrievalSplit& split);

// Train (seed), test (seed + 1, disjoint from train), validation (seed + 1000, disjoint from both) and one
// test split per held-out length. Disjointness is checked here, not assumed: a violation throws DataError.
// data.query_only then cuts every split to its query records (query_record_only).
RetrievalData build_retrieval_data(const DataConfig& data);

}  // namespace causal
