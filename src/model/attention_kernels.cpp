// Attention kernels (see attention_kernels.h for the shared contract).
#include "model/attention_kernels.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "model/sdpa_compat.h"

namespace causal {
namespace {

void check_qkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(q.dim() == 4, "[attention] expected q (B,Hq,Tq,dk), got ", q.sizes());
  TORCH_CHECK(k.dim() == 4, "[attention] expected k (B,Hkv,Tk,dk), got ", k.sizes());
  TORCH_CHECK(v.sizes() == k.sizes(), "[attention] expected v shaped like k ", k.sizes(), ", got ",
              v.sizes());
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(3),
              "[attention] expected k (B,Hkv,Tk,dk) matching q's B and dk ", q.sizes(), ", got ", k.sizes());
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "[attention] expected Hq=", q.size(1),
              " divisible by Hkv=", k.size(1));
}

// GQA: consecutive query heads share a KV head, so KV head j serves query heads j*G..j*G+G-1.
torch::Tensor repeat_kv(const torch::Tensor& x, int64_t query_heads) {
  const int64_t group = query_heads / x.size(1);
  return group == 1 ? x : x.repeat_interleave(group, /*dim=*/1);  // (B,Hq,Tk,dk)
}

// A row with no allowed key would softmax over all -inf (NaN). Such rows attend everywhere instead (finite
// values and gradients) and are zeroed afterwards by the returned 0/1 factor.
struct SafeMask {
  torch::Tensor mask;     // (B|1,1,Tq,Tk) bool, no all-false row
  torch::Tensor has_key;  // (B|1,1,Tq,1) bool: the row had at least one allowed key
};

SafeMask make_safe_mask(const torch::Tensor& allowed, const torch::Tensor& q, const torch::Tensor& k) {
  TORCH_CHECK(allowed.scalar_type() == torch::kBool, "[attention] expected a bool mask, got ",
              allowed.scalar_type());
  TORCH_CHECK(allowed.dim() == 4 && allowed.size(2) == q.size(2) && allowed.size(3) == k.size(2),
              "[attention] expected mask (B,1,Tq,Tk) with Tq=", q.size(2), " Tk=", k.size(2), ", got ",
              allowed.sizes());
  torch::Tensor has_key = allowed.any(/*dim=*/-1, /*keepdim=*/true);  // (B|1,1,Tq,1)
  return {allowed | has_key.logical_not(), has_key};
}

}  // namespace

AttentionResult attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& allowed, double dropout_p, bool want_weights) {
  check_qkv(q, k, v);
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), dk = q.size(3), tk = k.size(2);
  const torch::Tensor keys = repeat_kv(k, heads);    // (B,Hq,Tk,dk)
  const torch::Tensor values = repeat_kv(v, heads);  // (B,Hq,Tk,dk)
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const torch::Tensor q3 = (q * scale).reshape({batch * heads, tq, dk});
  const torch::Tensor kt3 = keys.reshape({batch * heads, tk, dk}).transpose(1, 2);

  // The scale goes on q, T/dk times smaller than the scores, and the mask rides on the product (beta = 1
  // over an additive 0/-inf bias): two passes over the scores fewer, and two fewer in backward.
  torch::Tensor scores;
  torch::Tensor has_key;
  if (allowed.defined()) {
    const SafeMask safe = make_safe_mask(allowed, q, k);
    // -inf, not a large negative number, so that exp gives exactly 0 for forbidden keys.
    const torch::Tensor bias = torch::zeros(safe.mask.sizes(), q.options())
                                   .masked_fill_(safe.mask.logical_not(),
                                                 -std::numeric_limits<double>::infinity());  // (B|1,1,Tq,Tk)
    // One copy of the bias per head is the output buffer the product accumulates into; contiguous, because
    // reshape may keep the expand's zero strides and the product would then write over itself.
    scores = bias.expand({batch, heads, tq, tk}).reshape({batch * heads, tq, tk}).contiguous();
    scores.baddbmm_(q3, kt3, /*beta=*/1.0, /*alpha=*/1.0);
    has_key = safe.has_key.to(q.scalar_type());  // (B|1,1,Tq,1)
  } else {
    scores = torch::bmm(q3, kt3);
  }
  const torch::Tensor weights = torch::softmax(scores, -1).view({batch, heads, tq, tk});  // (B,Hq,Tq,Tk)
  const torch::Tensor dropped =
      dropout_p > 0.0 ? torch::dropout(weights, dropout_p, /*train=*/true) : weights;
  torch::Tensor out = torch::matmul(dropped, values);  // (B,Hq,Tq,dk)
  // A row without keys attended everywhere; zeroing its output (not its T weights) also stops its gradient.
  if (has_key.defined()) out = out * has_key;
  if (!want_weights) return {out, torch::Tensor()};
  return {out, has_key.defined() ? weights * has_key : weights};
}

torch::Tensor attention_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& allowed, double dropout_p) {
  check_qkv(q, k, v);
  const int64_t heads = q.size(1);
  // The fused op wants equal head counts (LibTorch 1.13 has no GQA mode).
  const torch::Tensor keys = repeat_kv(k, heads);    // (B,Hq,Tk,dk)
  const torch::Tensor values = repeat_kv(v, heads);  // (B,Hq,Tk,dk)
  if (!allowed.defined()) {
    return fused_scaled_dot_product_attention(q, keys, values, torch::Tensor(), dropout_p);  // (B,Hq,Tq,dk)
  }
  const SafeMask safe = make_safe_mask(allowed, q, k);
  const torch::Tensor out = fused_scaled_dot_product_attention(q, keys, values, safe.mask, dropout_p);
  return out * safe.has_key.to(out.scalar_type());  // (B,Hq,Tq,dk)
}

}  // namespace causal
