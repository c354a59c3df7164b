// KV cache (see kv_cache.h).
#include "model/kv_cache.h"

#include <torch/torch.h>

namespace causal {

KVCache::KVCache(int64_t n_layers, int64_t batch_size, int64_t max_len)
    : batch_size_(batch_size), max_len_(max_len), keys_(n_layers), values_(n_layers) {
  TORCH_CHECK(n_layers > 0, "[kv_cache] expected n_layers > 0, got ", n_layers);
  TORCH_CHECK(batch_size > 0, "[kv_cache] expected batch_size > 0, got ", batch_size);
  TORCH_CHECK(max_len >= 0, "[kv_cache] expected max_len >= 0 (0 = grow), got ", max_len);
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i].defined()) total += keys_[i].nbytes() + values_[i].nbytes();
  }
  return total;
}

void KVCache::reset() {
  length_ = 0;
  for (size_t i = 0; i < keys_.size(); ++i) {
    keys_[i] = torch::Tensor();
    values_[i] = torch::Tensor();
  }
  key_valid_ = torch::Tensor();
  segment_ids_ = torch::Tensor();
}

std::pair<torch::Tensor, torch::Tensor> KVCache::append(int64_t layer, const torch::Tensor& k,
                                                        const torch::Tensor& v) {
  TORCH_CHECK(layer >= 0 && layer < n_layers(), "[kv_cache] layer ", layer, " out of range [0,", n_layers(),
              ")");
  TORCH_CHECK(k.dim() == 4 && k.size(0) == batch_size_,
              "[kv_cache] expected k (B,Hkv,T,dk) with B=", batch_size_, ", got ", k.sizes());
  TORCH_CHECK(v.sizes() == k.sizes(), "[kv_cache] expected v shaped like k ", k.sizes(), ", got ", v.sizes());
  const int64_t new_tokens = k.size(2);
  const int64_t total = length_ + new_tokens;
  torch::Tensor& keys = keys_[layer];
  torch::Tensor& values = values_[layer];
  if (keys.defined()) {
    TORCH_CHECK(keys.size(1) == k.size(1) && keys.size(3) == k.size(3), "[kv_cache] layer ", layer,
                " holds (B,Hkv,T,dk)=", keys.sizes(), ", cannot append ", k.sizes());
    TORCH_CHECK(keys.scalar_type() == k.scalar_type() && keys.device() == k.device(), "[kv_cache] layer ",
                layer, " holds ", keys.scalar_type(), " on ", keys.device(), ", cannot append ",
                k.scalar_type(), " on ", k.device());
  }

  if (max_len_ > 0) {
    TORCH_CHECK(total <= max_len_, "[kv_cache] ", total, " positions exceed max_len ", max_len_,
                " (hint: create the cache with a larger max_len, or 0 to grow)");
    if (!keys.defined()) {
      keys = torch::empty({batch_size_, k.size(1), max_len_, k.size(3)}, k.options());  // (B,Hkv,max_len,dk)
      values = torch::empty({batch_size_, v.size(1), max_len_, v.size(3)}, v.options());
    }
    keys.narrow(2, length_, new_tokens).copy_(k.detach());
    values.narrow(2, length_, new_tokens).copy_(v.detach());
    return {keys.narrow(2, 0, total), values.narrow(2, 0, total)};  // (B,Hkv,Tcache+T,dk)
  }

  // Growing mode. Stored tensors may run past length_ if an earlier forward failed before commit():
  // only the committed prefix is kept.
  if (length_ == 0 || !keys.defined()) {
    TORCH_CHECK(length_ == 0, "[kv_cache] layer ", layer, " is empty but the cache holds ", length_,
                " positions");
    keys = k.detach();
    values = v.detach();
  } else {
    keys = torch::cat({keys.narrow(2, 0, length_), k.detach()}, 2);  // (B,Hkv,Tcache+T,dk)
    values = torch::cat({values.narrow(2, 0, length_), v.detach()}, 2);
  }
  return {keys, values};
}

std::pair<torch::Tensor, torch::Tensor> KVCache::extend_keys(const torch::Tensor& new_valid,
                                                             const torch::Tensor& new_segment,
                                                             int64_t new_tokens) const {
  torch::Tensor valid;
  if (new_valid.defined() || key_valid_.defined()) {
    const torch::Tensor& like = new_valid.defined() ? new_valid : key_valid_;
    const torch::Tensor old_part =
        key_valid_.defined() ? key_valid_
                             : torch::ones({batch_size_, length_}, like.options().dtype(torch::kBool));
    const torch::Tensor new_part =
        new_valid.defined() ? new_valid
                            : torch::ones({batch_size_, new_tokens}, like.options().dtype(torch::kBool));
    valid = torch::cat({old_part, new_part}, 1);  // (B,Tcache+T)
  }
  torch::Tensor segment;
  if (new_segment.defined()) {
    TORCH_CHECK(length_ == 0 || segment_ids_.defined(), "[kv_cache] segment_ids given now but not for the ",
                length_, " cached positions (give them in every call or none)");
    segment = length_ == 0 ? new_segment : torch::cat({segment_ids_, new_segment}, 1);  // (B,Tcache+T)
  } else {
    TORCH_CHECK(!segment_ids_.defined() || length_ == 0,
                "[kv_cache] segment_ids were given for cached positions but not now (give them in every call "
                "or none)");
  }
  return {valid, segment};
}

void KVCache::commit(int64_t new_tokens, const torch::Tensor& key_valid, const torch::Tensor& segment_ids) {
  TORCH_CHECK(new_tokens >= 0, "[kv_cache] expected new_tokens >= 0, got ", new_tokens);
  const int64_t total = length_ + new_tokens;
  for (int64_t layer = 0; layer < n_layers(); ++layer) {
    TORCH_CHECK(keys_[layer].defined() && keys_[layer].size(2) >= total, "[kv_cache] layer ", layer,
                " was not appended ", new_tokens, " positions before commit");
  }
  TORCH_CHECK(!key_valid.defined() || key_valid.size(1) == total, "[kv_cache] expected key_valid (B,", total,
              "), got ", key_valid.sizes());
  TORCH_CHECK(!segment_ids.defined() || segment_ids.size(1) == total, "[kv_cache] expected segment_ids (B,",
              total, "), got ", segment_ids.sizes());
  length_ = total;
  key_valid_ = key_valid.defined() ? key_valid.detach() : key_valid;
  segment_ids_ = segment_ids.defined() ? segment_ids.detach() : segment_ids;
}

}  // namespace causal
