// The only place that knows how each LibTorch version spells its fused scaled-dot-product attention.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/scaled_dot_product_attention.h>
#else
#include <ATen/ops/_scaled_dot_product_attention.h>
#endif

namespace causal {

// Fused attention over q (B,H,Tq,dk), k/v (B,H,Tk,dk) (equal head counts) with a boolean mask
// broadcastable to (B,H,Tq,Tk), true = may attend; undefined = every key. Scale 1/sqrt(dk).
// is_causal is not used here: it is top-left aligned, which is wrong for cached decoding, and cannot be
// combined with a mask (see fused_causal_attention). A fully masked row gives NaN: callers pass a "safe"
// mask.
inline at::Tensor fused_scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                                     const at::Tensor& v, const at::Tensor& mask,
                                                     double dropout_p) {
  const c10::optional<at::Tensor> attn_mask =
      mask.defined() ? c10::optional<at::Tensor>(mask) : c10::optional<at::Tensor>();
#if TORCH_VERSION_MAJOR >= 2
  // 2.x: public op returning the output only.
  return at::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, /*is_causal=*/false);
#else
  // 1.13: private op returning (output, weights); weights are not requested.
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
                                                       /*need_attn_weights=*/false, /*is_causal=*/false));
#endif
}

// The same over one whole sequence with causal order (query i reads keys 0..i), Tq == Tk: there the fused
// op's top-left causal flag is the right mask, and its kernels skip the blocks it excludes.
inline at::Tensor fused_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                         double dropout_p) {
  TORCH_CHECK(q.size(2) == k.size(2), "[attention] causal flag with ", q.size(2), " queries and ", k.size(2),
              " keys: it is only right for one whole sequence");
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, c10::nullopt, dropout_p, /*is_causal=*/true);
#else
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, c10::nullopt, dropout_p,
                                                       /*need_attn_weights=*/false, /*is_causal=*/true));
#endif
}

}  // namespace causal
