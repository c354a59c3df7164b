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

}  // namespace causal
