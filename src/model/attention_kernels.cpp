// Attention kernels (see attention_kernels.h for the shared contract).
#include "model/attention_kernels.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "model/query_block_attention.h"
#include "model/sdpa_compat.h"
#include "model/softmax_compat.h"

namespace causal {
namespace {

// From this length on the reference kernel splits the queries in two when no query reads a later key.
// Forward and backward of one layer's attention in bf16 on the 2-core development machine: 0.6-0.8x the
// time at T 256 and 512, level at T 128, slower below (docs/bench.md#query-halves).
constexpr int64_t kSplitFromLength = 256;

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

void check_mask(const PreparedMask& mask, const torch::Tensor& q, const torch::Tensor& k) {
  const torch::Tensor& allowed = mask.allowed;
  TORCH_CHECK(allowed.dim() == 4 && allowed.size(2) == q.size(2) && allowed.size(3) == k.size(2),
              "[attention] expected mask (B,1,Tq,Tk) with Tq=", q.size(2), " Tk=", k.size(2), ", got ",
              allowed.sizes());
}

// A prepared mask's 0/1 factor meets outputs whose dtype autocast chose.
torch::Tensor in_dtype(const torch::Tensor& t, c10::ScalarType dtype) {
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

}  // namespace

PreparedMask prepare_mask(const torch::Tensor& allowed, const torch::TensorOptions& scores, bool additive,
                          bool rows_have_keys) {
  TORCH_CHECK(allowed.scalar_type() == torch::kBool, "[attention] expected a bool mask, got ",
              allowed.scalar_type());
  PreparedMask mask;
  mask.allowed = allowed;
  if (!rows_have_keys) {
    // A row with no allowed key would softmax over all -inf (NaN). Such rows attend everywhere instead
    // (finite values and gradients) and are zeroed afterwards by has_key.
    const torch::Tensor has_key = allowed.any(/*dim=*/-1, /*keepdim=*/true);  // (B|1,1,Tq,1)
    mask.allowed = allowed | has_key.logical_not();
    mask.has_key = has_key.to(scores.dtype());
  }
  if (additive) {
    // -inf, not a large negative number, so that exp gives exactly 0 for forbidden keys.
    mask.bias = torch::zeros(mask.allowed.sizes(), scores)
                    .masked_fill_(mask.allowed.logical_not(), -std::numeric_limits<double>::infinity());
  }
  return mask;
}

AttentionResult attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const torch::Tensor& allowed, double dropout_p, bool want_weights) {
  const PreparedMask mask =
      allowed.defined() ? prepare_mask(allowed, q.options(), /*additive=*/true, /*rows_have_keys=*/false)
                        : PreparedMask();
  return attention_reference(q, k, v, mask, dropout_p, want_weights);
}

AttentionResult attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const PreparedMask& mask, double dropout_p, bool want_weights) {
  check_qkv(q, k, v);
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), dk = q.size(3), tk = k.size(2);
  const torch::Tensor keys = repeat_kv(k, heads);    // (B,Hq,Tk,dk)
  const torch::Tensor values = repeat_kv(v, heads);  // (B,Hq,Tk,dk)
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const torch::Tensor q3 = (q * scale).reshape({batch * heads, tq, dk});
  const torch::Tensor k3 = keys.reshape({batch * heads, tk, dk});

  // The scale goes on q, T/dk times smaller than the scores, and the mask rides on the product (beta = 1
  // over an additive 0/-inf bias): two passes over the scores fewer, and two fewer in backward.
  torch::Tensor scores;
  torch::Tensor has_key;
  if (mask.defined()) {
    check_mask(mask, q, k);
    const torch::Tensor bias =
        mask.bias.defined()
            ? mask.bias
            : prepare_mask(mask.allowed, q.options(), /*additive=*/true, /*rows_have_keys=*/true).bias;
    if (mask.has_key.defined()) has_key = in_dtype(mask.has_key, q.scalar_type());  // (B|1,1,Tq,1)
    if (mask.no_future_keys && tq == tk && tq >= kSplitFromLength && dropout_p == 0.0 && !want_weights) {
      const torch::Tensor out =
          attention_query_blocks(q3, k3, values.reshape({batch * heads, tk, dk}), bias, batch, /*blocks=*/2)
              .view({batch, heads, tq, dk});  // (B,Hq,Tq,dk)
      return {has_key.defined() ? out * has_key : out, torch::Tensor()};
    }
    scores = biased_scores(q3, k3, bias, batch, 0, tq, tk);  // (B*Hq,Tq,Tk)
  } else {
    scores = torch::bmm(q3, k3.transpose(1, 2));
  }
  // A bfloat16 sum of T terms would keep 8 bits of mantissa: the row is summed in float.
  const torch::Tensor weights =
      softmax_float_accumulated(scores).view({batch, heads, tq, tk});  // (B,Hq,Tq,Tk)
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
  const PreparedMask mask =
      allowed.defined() ? prepare_mask(allowed, q.options(), /*additive=*/false, /*rows_have_keys=*/false)
                        : PreparedMask();
  return attention_sdpa(q, k, v, mask, dropout_p);
}

torch::Tensor attention_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const PreparedMask& mask, double dropout_p) {
  check_qkv(q, k, v);
  const int64_t heads = q.size(1);
  // The fused op wants equal head counts (LibTorch 1.13 has no GQA mode).
  const torch::Tensor keys = repeat_kv(k, heads);    // (B,Hq,Tk,dk)
  const torch::Tensor values = repeat_kv(v, heads);  // (B,Hq,Tk,dk)
  // On a GPU the causal flag instead of the mask: its kernels then skip the blocks above the diagonal
  // (half the work at T 1024) and read no mask. The CPU keeps the mask it always had.
  if (mask.causal && q.is_cuda()) {
    return fused_scaled_dot_product_attention(q, keys, values, torch::Tensor(), dropout_p,
                                              /*is_causal=*/true);  // (B,Hq,Tq,dk)
  }
  if (!mask.defined()) {
    return fused_scaled_dot_product_attention(q, keys, values, torch::Tensor(), dropout_p);  // (B,Hq,Tq,dk)
  }
  check_mask(mask, q, k);
  const torch::Tensor out = fused_scaled_dot_product_attention(q, keys, values, mask.allowed, dropout_p);
  return mask.has_key.defined() ? out * in_dtype(mask.has_key, out.scalar_type()) : out;  // (B,Hq,Tq,dk)
}

}  // namespace causal
