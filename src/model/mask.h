// The one attention mask: causal order, key padding, document segments and a sliding window, in one type
// that every kernel reads in the form it needs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>

namespace causal {

// Returns bool (B,1,Tq,Tk), true = the query may attend to the key:
//   key_index <= query_index (diagonal included) AND key_valid AND query_segment == key_segment
//   AND (window == 0 OR query_index - key_index < window).
// query_index (B,Tq) or (Tq) and key_index (B,Tk) or (Tk) are int64 order indices: the token's place in the
// sequence/cache, NOT its RoPE position (which restarts per document in packed rows). Cached decoding of Tq
// new tokens uses query indices cache_len..cache_len+Tq-1 against keys 0..cache_len+Tq-1 (rectangular).
// key_valid (B,Tk) bool may be undefined (every key valid). The segments (B,Tq)/(B,Tk) int64 are both
// given or both undefined. B is 1 when no argument has a batch dimension (the result then broadcasts).
// A query row may come out all false (e.g. a padding query whose keys are all padding); the attention
// kernels turn such rows into exact zeros.
at::Tensor build_allowed_mask(const at::Tensor& query_index, const at::Tensor& key_index,
                              const at::Tensor& key_valid, const at::Tensor& query_segment,
                              const at::Tensor& key_segment, int64_t window = 0);

// The arguments of build_allowed_mask: what a mask is built from, small enough to keep for backward.
struct MaskParts {
  at::Tensor query_index;    // (B|1,Tq) or (Tq)
  at::Tensor key_index;      // (B|1,Tk) or (Tk)
  at::Tensor key_valid;      // (B,Tk) or undefined
  at::Tensor query_segment;  // (B,Tq) or undefined
  at::Tensor key_segment;    // (B,Tk) or undefined
  int64_t window = 0;        // > 0: a query reads only its `window` latest keys, itself included

  bool defined() const { return query_index.defined(); }
  at::Tensor build() const;  // the whole (B|1,1,Tq,Tk) mask
  // Calls f(name, field) for every field, tensors and integers alike: how a kernel keeps the parts for its
  // backward without knowing them one by one.
  template <class F>
  void for_each_field(F&& f) {
    f("query_index", query_index);
    f("key_index", key_index);
    f("key_valid", key_valid);
    f("query_segment", query_segment);
    f("key_segment", key_segment);
    f("window", window);
  }
  // Queries [query_start, +queries) against keys [key_start, +keys): (B|1,1,queries,keys).
  at::Tensor block(int64_t query_start, int64_t queries, int64_t key_start, int64_t keys) const;
};

// Which keys each query may read, built once per forward and shared by every layer. Each form a kernel
// asks for is made on first use and kept (copies share them): the tiled kernel asks for blocks only and
// never holds the whole Tq x Tk mask. Undefined (default-constructed): every key.
class AttentionMask {
 public:
  AttentionMask() = default;
  explicit AttentionMask(MaskParts parts);

  bool defined() const { return parts_.defined(); }
  const MaskParts& parts() const { return parts_; }
  int64_t queries() const;  // Tq
  int64_t keys() const;     // Tk
  // Exactly the causal triangle of one uncached sequence: no padding, segments or window. A kernel may
  // use its own causal path instead of reading the mask.
  bool causal() const;
  // No query may read a key after its own place (Tq == Tk, one uncached sequence).
  bool no_future_keys() const;

  // (B|1,1,Tq,Tk) bool, as build_allowed_mask returns it. This and the forms below need a defined mask.
  at::Tensor allowed() const;
  at::Tensor block(int64_t query_start, int64_t queries, int64_t key_start, int64_t keys) const {
    return parts_.block(query_start, queries, key_start, keys);
  }
  // allowed() without an all-false row: a row without keys reads every key instead (softmax stays finite)
  // and its output is zeroed by has_key.
  at::Tensor repaired() const;
  // (B|1,1,Tq,1) 0/1 in `dtype`; undefined when every row has an allowed key (always when undefined).
  at::Tensor has_key(c10::ScalarType dtype) const;
  // repaired() as an additive bias in `dtype`: 0 where allowed, -inf elsewhere.
  at::Tensor bias(c10::ScalarType dtype) const;

 private:
  struct Forms;
  MaskParts parts_;
  std::shared_ptr<Forms> forms_;
};

}  // namespace causal
