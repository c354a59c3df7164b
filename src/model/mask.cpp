// Attention mask builder (see mask.h for the contract).
#include "model/mask.h"

#include <torch/torch.h>

namespace causal {
namespace {

// (Tn) -> (1,Tn) so that one code path serves shared and per-row indices.
torch::Tensor as_rows(const torch::Tensor& index, const char* name) {
  TORCH_CHECK(index.defined(), "[mask] ", name, " is required");
  TORCH_CHECK(index.scalar_type() == torch::kLong, "[mask] expected ", name, " int64, got ",
              index.scalar_type());
  TORCH_CHECK(index.dim() == 1 || index.dim() == 2, "[mask] expected ", name, " (B,T) or (T), got ",
              index.sizes());
  return index.dim() == 1 ? index.unsqueeze(0) : index;
}

}  // namespace

torch::Tensor build_allowed_mask(const torch::Tensor& query_index, const torch::Tensor& key_index,
                                 const torch::Tensor& key_valid, const torch::Tensor& query_segment,
                                 const torch::Tensor& key_segment) {
  const torch::Tensor q_index = as_rows(query_index, "query_index");  // (B|1,Tq)
  const torch::Tensor k_index = as_rows(key_index, "key_index");      // (B|1,Tk)
  const int64_t tq = q_index.size(1);
  const int64_t tk = k_index.size(1);

  torch::Tensor allowed = k_index.unsqueeze(1) <= q_index.unsqueeze(2);  // (B|1,Tq,Tk)

  if (key_valid.defined()) {
    TORCH_CHECK(key_valid.scalar_type() == torch::kBool, "[mask] expected key_valid bool, got ",
                key_valid.scalar_type());
    TORCH_CHECK(key_valid.dim() == 2 && key_valid.size(1) == tk,
                "[mask] expected key_valid (B,Tk) with Tk=", tk, ", got ", key_valid.sizes());
    allowed = allowed & key_valid.unsqueeze(1);  // (B,Tq,Tk)
  }

  TORCH_CHECK(query_segment.defined() == key_segment.defined(),
              "[mask] query_segment and key_segment must both be given or both be undefined");
  if (query_segment.defined()) {
    TORCH_CHECK(query_segment.dim() == 2 && query_segment.size(1) == tq,
                "[mask] expected query_segment (B,Tq) with Tq=", tq, ", got ", query_segment.sizes());
    TORCH_CHECK(key_segment.dim() == 2 && key_segment.size(1) == tk,
                "[mask] expected key_segment (B,Tk) with Tk=", tk, ", got ", key_segment.sizes());
    allowed = allowed & (query_segment.unsqueeze(2) == key_segment.unsqueeze(1));  // (B,Tq,Tk)
  }
  return allowed.unsqueeze(1);  // (B,1,Tq,Tk): broadcasts over heads
}

at::Tensor MaskParts::build() const {
  return build_allowed_mask(query_index, key_index, key_valid, query_segment, key_segment);
}

at::Tensor MaskParts::block(int64_t query_start, int64_t queries, int64_t key_start, int64_t keys) const {
  // Index tensors are (T) or (B,T): their last dimension is time.
  const auto queries_of = [&](const at::Tensor& t) {
    return t.defined() ? t.narrow(-1, query_start, queries) : t;
  };
  const auto keys_of = [&](const at::Tensor& t) { return t.defined() ? t.narrow(-1, key_start, keys) : t; };
  return build_allowed_mask(queries_of(query_index), keys_of(key_index), keys_of(key_valid),
                            queries_of(query_segment), keys_of(key_segment));
}

}  // namespace causal
