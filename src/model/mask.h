// The one builder of attention masks: causal order, key padding and segment isolation in one boolean tensor.
#pragma once

#include <ATen/core/Tensor.h>

namespace causal {

// Returns bool (B,1,Tq,Tk), true = the query may attend to the key:
//   key_index <= query_index (diagonal included) AND key_valid AND query_segment == key_segment.
// query_index (B,Tq) or (Tq) and key_index (B,Tk) or (Tk) are int64 order indices: the token's place in the
// sequence/cache, NOT its RoPE position (which restarts per document in packed rows). Cached decoding of Tq
// new tokens uses query indices cache_len..cache_len+Tq-1 against keys 0..cache_len+Tq-1 (rectangular).
// key_valid (B,Tk) bool may be undefined (every key valid). The segments (B,Tq)/(B,Tk) int64 are both
// given or both undefined. B is 1 when no argument has a batch dimension (the result then broadcasts).
// A query row may come out all false (e.g. a padding query whose keys are all padding); the attention
// kernels turn such rows into exact zeros.
at::Tensor build_allowed_mask(const at::Tensor& query_index, const at::Tensor& key_index,
                              const at::Tensor& key_valid, const at::Tensor& query_segment,
                              const at::Tensor& key_segment);

// The arguments of build_allowed_mask, kept so that a kernel can build the mask of one block of queries and
// keys at a time and never hold the (B,1,Tq,Tk) whole (flash at long context).
struct MaskParts {
  at::Tensor query_index;    // (B|1,Tq) or (Tq)
  at::Tensor key_index;      // (B|1,Tk) or (Tk)
  at::Tensor key_valid;      // (B,Tk) or undefined
  at::Tensor query_segment;  // (B,Tq) or undefined
  at::Tensor key_segment;    // (B,Tk) or undefined

  bool defined() const { return query_index.defined(); }
  at::Tensor build() const;  // the whole (B|1,1,Tq,Tk) mask
  // Queries [query_start, +queries) against keys [key_start, +keys): (B|1,1,queries,keys).
  at::Tensor block(int64_t query_start, int64_t queries, int64_t key_start, int64_t keys) const;
};

}  // namespace causal
