// KV cache for incremental decoding: per-layer keys/values of every token seen so far, plus key metadata.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

namespace causal {

// Owned by the caller (e.g. the generator) and mutated by TransformerImpl::forward, which appends the new
// tokens' K/V in every layer and then commit()s. Inference only: stored tensors are detached, so no
// gradient flows through the cache. The batch size is fixed at creation; dtype and device follow the
// first K/V appended.
class KVCache {
 public:
  // max_len 0: grow by concatenation; max_len > 0: preallocate max_len positions on the first append
  // (no reallocation while decoding, and appending beyond max_len is an error).
  KVCache(int64_t n_layers, int64_t batch_size, int64_t max_len = 0);

  int64_t length() const { return length_; }  // committed positions Tcache
  int64_t n_layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t batch_size() const { return batch_size_; }
  int64_t max_len() const { return max_len_; }
  int64_t bytes() const;  // bytes held by K/V storage (preallocated capacity included)
  void reset();           // forgets every position; keeps n_layers, batch size and max_len

  // Stores layer `layer`'s K/V for new tokens k, v (B,Hkv,T,dk) at positions length()..length()+T-1 and
  // returns K/V over positions 0..length()+T-1 (B,Hkv,Tcache+T,dk). length() is unchanged until commit().
  std::pair<at::Tensor, at::Tensor> append(int64_t layer, const at::Tensor& k, const at::Tensor& v);

  // Key metadata over cached + new positions, without storing it: key_valid (B,Tcache+T) bool (undefined if
  // never given) and segment ids (B,Tcache+T) int64 (undefined if never given). new_valid / new_segment
  // are (B,T) or undefined; undefined validity means valid. Segment ids must be given in every call or none.
  std::pair<at::Tensor, at::Tensor> extend_keys(const at::Tensor& new_valid, const at::Tensor& new_segment,
                                                int64_t new_tokens) const;

  // Makes `new_tokens` appended positions visible and stores the metadata returned by extend_keys.
  void commit(int64_t new_tokens, const at::Tensor& key_valid, const at::Tensor& segment_ids);

 private:
  int64_t batch_size_;
  int64_t max_len_;
  int64_t length_ = 0;
  std::vector<at::Tensor> keys_;    // per layer (B,Hkv,Tstored,dk); Tstored >= length_
  std::vector<at::Tensor> values_;  // per layer (B,Hkv,Tstored,dk)
  at::Tensor key_valid_;            // (B,Tcache) bool or undefined
  at::Tensor segment_ids_;          // (B,Tcache) int64 or undefined
};

}  // namespace causal
