// Attention mask builder (see mask.h for the contract).
#include "model/mask.h"

#include <torch/torch.h>

#include <limits>

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
                                 const torch::Tensor& key_segment, int64_t window) {
  const torch::Tensor q_index = as_rows(query_index, "query_index");  // (B|1,Tq)
  const torch::Tensor k_index = as_rows(key_index, "key_index");      // (B|1,Tk)
  const int64_t tq = q_index.size(1);
  const int64_t tk = k_index.size(1);
  TORCH_CHECK(window >= 0, "[mask] expected window >= 0, got ", window);

  const torch::Tensor distance = q_index.unsqueeze(2) - k_index.unsqueeze(1);  // (B|1,Tq,Tk)
  torch::Tensor allowed = distance >= 0;
  if (window > 0) allowed = allowed & (distance < window);

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
  return build_allowed_mask(query_index, key_index, key_valid, query_segment, key_segment, window);
}

at::Tensor MaskParts::block(int64_t query_start, int64_t queries, int64_t key_start, int64_t keys) const {
  // Index tensors are (T) or (B,T): their last dimension is time.
  const auto queries_of = [&](const at::Tensor& t) {
    return t.defined() ? t.narrow(-1, query_start, queries) : t;
  };
  const auto keys_of = [&](const at::Tensor& t) { return t.defined() ? t.narrow(-1, key_start, keys) : t; };
  return build_allowed_mask(queries_of(query_index), keys_of(key_index), keys_of(key_valid),
                            queries_of(query_segment), keys_of(key_segment), window);
}

struct AttentionMask::Forms {
  // A form in one dtype, rebuilt when a kernel asks for another (autocast changes the scores' dtype).
  struct Typed {
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    torch::Tensor value;
  };
  torch::Tensor allowed, repaired, has_key;  // has_key in bool; undefined when every row has a key
  Typed has_key_typed, bias;
};

AttentionMask::AttentionMask(MaskParts parts) : parts_(std::move(parts)), forms_(std::make_shared<Forms>()) {
  TORCH_CHECK(parts_.defined() && parts_.key_index.defined(), "[mask] expected query and key indices");
}

int64_t AttentionMask::queries() const { return parts_.query_index.size(-1); }
int64_t AttentionMask::keys() const { return parts_.key_index.size(-1); }

bool AttentionMask::causal() const {
  return no_future_keys() && !parts_.key_valid.defined() && !parts_.query_segment.defined() &&
         parts_.window == 0;
}

bool AttentionMask::no_future_keys() const {
  // Without a cache the query and key indices are the same places 0..T-1: the mask's first rule then
  // forbids every later key.
  return defined() && queries() == keys();
}

at::Tensor AttentionMask::allowed() const {
  TORCH_CHECK(defined(), "[mask] an undefined mask (every key) has no tensor form");
  if (!forms_->allowed.defined()) forms_->allowed = parts_.build();
  return forms_->allowed;
}

at::Tensor AttentionMask::repaired() const {
  Forms& f = *forms_;
  if (!f.repaired.defined()) {
    f.repaired = allowed();
    // Without key padding every query may read its own key: no row is left without one.
    if (parts_.key_valid.defined()) {
      const torch::Tensor has_key = f.repaired.any(/*dim=*/-1, /*keepdim=*/true);  // (B|1,1,Tq,1)
      f.repaired = f.repaired | has_key.logical_not();
      f.has_key = has_key;
    }
  }
  return f.repaired;
}

at::Tensor AttentionMask::has_key(c10::ScalarType dtype) const {
  if (!defined()) return {};
  repaired();
  Forms& f = *forms_;
  if (!f.has_key.defined()) return {};
  if (f.has_key_typed.dtype != dtype) f.has_key_typed = {dtype, f.has_key.to(dtype)};
  return f.has_key_typed.value;
}

at::Tensor AttentionMask::bias(c10::ScalarType dtype) const {
  Forms& f = *forms_;
  if (f.bias.dtype != dtype) {
    const torch::Tensor open = repaired();
    // -inf, not a large negative number, so that exp gives exactly 0 for forbidden keys.
    f.bias = {dtype, torch::zeros(open.sizes(), open.options().dtype(dtype))
                         .masked_fill_(open.logical_not(), -std::numeric_limits<double>::infinity())};
  }
  return f.bias.value;
}

}  // namespace causal
