// The reference and fused attention kernels, and the table of kernels (see attention_kernels.h).
#include "model/attention_kernels.h"

#include <torch/torch.h>

#include <cmath>

#include "model/flash_attention.h"
#include "model/query_block_attention.h"
#include "model/sdpa_compat.h"
#include "model/softmax_compat.h"

namespace causal {

void check_attention_inputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const AttentionMask& mask) {
  TORCH_CHECK(q.dim() == 4, "[attention] expected q (B,Hq,Tq,dk), got ", q.sizes());
  TORCH_CHECK(k.dim() == 4, "[attention] expected k (B,Hkv,Tk,dk), got ", k.sizes());
  TORCH_CHECK(v.sizes() == k.sizes(), "[attention] expected v shaped like k ", k.sizes(), ", got ",
              v.sizes());
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(3) == q.size(3),
              "[attention] expected k (B,Hkv,Tk,dk) matching q's B and dk ", q.sizes(), ", got ", k.sizes());
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "[attention] expected Hq=", q.size(1),
              " divisible by Hkv=", k.size(1));
  TORCH_CHECK(!mask.defined() || (mask.queries() == q.size(2) && mask.keys() == k.size(2)),
              "[attention] expected a mask of Tq=", q.size(2), " queries and Tk=", k.size(2), " keys, got ",
              mask.defined() ? mask.queries() : 0, " and ", mask.defined() ? mask.keys() : 0);
}

// GQA: consecutive query heads share a KV head, so KV head j serves query heads j*G..j*G+G-1.
torch::Tensor repeat_kv(const torch::Tensor& x, int64_t query_heads) {
  const int64_t group = query_heads / x.size(1);
  return group == 1 ? x : x.repeat_interleave(group, /*dim=*/1);  // (B,Hq,Tk,dk)
}

AttentionKernel attention_kernel(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kReference:
      return attention_reference;
    case AttentionKind::kSdpa:
      return attention_sdpa;
    case AttentionKind::kFlash:
      return attention_flash;
    case AttentionKind::kQueryBlocks:
      return attention_query_blocks;
  }
  TORCH_CHECK(false, "[attention] unknown kernel ", static_cast<int>(kind));
}

at::Tensor biased_scores(const at::Tensor& q3, const at::Tensor& k3, const at::Tensor& bias, int64_t batch,
                         int64_t start, int64_t rows, int64_t keys) {
  const int64_t rows_all = q3.size(0);
  torch::Tensor scores = torch::empty({rows_all, rows, keys}, bias.options());
  scores.view({batch, rows_all / batch, rows, keys}).copy_(bias.narrow(2, start, rows).narrow(3, 0, keys));
  return scores.baddbmm_(q3.narrow(1, start, rows), k3.narrow(1, 0, keys).transpose(1, 2), /*beta=*/1.0,
                         /*alpha=*/1.0);
}

AttentionResult attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const AttentionMask& mask, const KernelOptions& options) {
  check_attention_inputs(q, k, v, mask);
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), dk = q.size(3), tk = k.size(2);
  const torch::Tensor values = repeat_kv(v, heads);  // (B,Hq,Tk,dk)
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const torch::Tensor q3 = (q * scale).reshape({batch * heads, tq, dk});
  const torch::Tensor k3 = repeat_kv(k, heads).reshape({batch * heads, tk, dk});

  // The scale goes on q, T/dk times smaller than the scores, and the mask rides on the product (beta = 1
  // over an additive 0/-inf bias): two passes over the scores fewer, and two fewer in backward.
  const torch::Tensor scores = mask.defined()
                                   ? biased_scores(q3, k3, mask.bias(q.scalar_type()), batch, 0, tq, tk)
                                   : torch::bmm(q3, k3.transpose(1, 2));  // (B*Hq,Tq,Tk)
  // A bfloat16 sum of T terms would keep 8 bits of mantissa: the row is summed in float.
  const torch::Tensor weights =
      softmax_float_accumulated(scores).view({batch, heads, tq, tk});  // (B,Hq,Tq,Tk)
  const torch::Tensor dropped =
      options.dropout_p > 0.0 ? torch::dropout(weights, options.dropout_p, /*train=*/true) : weights;
  torch::Tensor out = torch::matmul(dropped, values);  // (B,Hq,Tq,dk)
  // A row without keys attended everywhere; zeroing its output (not its T weights) also stops its gradient.
  const torch::Tensor has_key = mask.has_key(q.scalar_type());  // (B|1,1,Tq,1) or undefined
  if (has_key.defined()) out = out * has_key;
  if (!options.want_weights) return {out, torch::Tensor()};
  return {out, has_key.defined() ? weights * has_key : weights};
}

AttentionResult attention_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionMask& mask, const KernelOptions& options) {
  check_attention_inputs(q, k, v, mask);
  const double dropout_p = options.dropout_p;
  TORCH_CHECK(!options.want_weights,
              "[attention] \"sdpa\" cannot return attention weights (the reference can)");
  const int64_t heads = q.size(1);
  // The fused op wants equal head counts (LibTorch 1.13 has no GQA mode).
  const torch::Tensor keys = repeat_kv(k, heads);    // (B,Hq,Tk,dk)
  const torch::Tensor values = repeat_kv(v, heads);  // (B,Hq,Tk,dk)
  // On a GPU the causal flag instead of the mask: its kernels then skip the blocks above the diagonal
  // (half the work at T 1024) and read no mask. On the CPU the flag measured within noise of the mask
  // (docs/bench.md).
  if (mask.causal() && q.is_cuda()) {
    return {fused_scaled_dot_product_attention(q, keys, values, torch::Tensor(), dropout_p,
                                               /*is_causal=*/true),
            torch::Tensor()};  // (B,Hq,Tq,dk)
  }
  if (!mask.defined()) {
    return {fused_scaled_dot_product_attention(q, keys, values, torch::Tensor(), dropout_p), torch::Tensor()};
  }
  const torch::Tensor out = fused_scaled_dot_product_attention(q, keys, values, mask.repaired(), dropout_p);
  const torch::Tensor has_key = mask.has_key(out.scalar_type());
  return {has_key.defined() ? out * has_key : out, torch::Tensor()};  // (B,Hq,Tq,dk)
}

}  // namespace causal
