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

#include "model/optional_tensor.h"

namespace causal {

// Fused attention over q (B,H,Tq,dk), k/v (B,H,Tk,dk) (equal head counts) with a boolean mask
// broadcastable to (B,H,Tq,Tk), true = may attend; undefined = every key. Scale 1/sqrt(dk). A fully masked
// row gives NaN: callers pass a "safe" mask.
// is_causal (no mask then): query i reads keys 0..i. The op's flag is top-left aligned, which is right only
// for one whole sequence (Tq == Tk), not for cached decoding; there its kernels skip the excluded blocks.
inline at::Tensor fused_scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k,
                                                     const at::Tensor& v, const at::Tensor& mask,
                                                     double dropout_p, bool is_causal = false) {
  TORCH_CHECK(!is_causal || (!mask.defined() && q.size(2) == k.size(2)), "[attention] causal flag with ",
              q.size(2), " queries, ", k.size(2), " keys and ", mask.defined() ? "a" : "no",
              " mask: it is only right for one whole sequence without a mask");
  const c10::optional<at::Tensor> attn_mask = optional_tensor(mask);
#if TORCH_VERSION_MAJOR >= 2
  // 2.x: public op returning the output only.
  return at::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal);
#else
  // 1.13: private op returning (output, weights); weights are not requested.
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
                                                       /*need_attn_weights=*/false, is_causal));
#endif
}

}  // namespace causal
