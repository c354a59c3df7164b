// Tiled attention with an online softmax ("flash"): no T x T score or weight tensor, custom backward.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "model/mask.h"

namespace causal {

// The contract of attention_kernels.h (q (B,Hq,Tq,dk), k/v (B,Hkv,Tk,dk), query head h reads KV head
// h / (Hq/Hkv), allowed bool broadcastable to (B,1,Tq,Tk) or undefined, forbidden weights exactly 0, a row
// with no allowed key gives exactly zero output and zero gradients), computed over key blocks of `block`
// keys with a running maximum, sum and weighted value sum per query row. Returns (B,Hq,Tq,dk).
// Float intermediates exist per block only, (B,Hq,Tq,block); what backward keeps is q, k, v, the output and
// one log-sum-exp per query row, and it recomputes each block's weights from them. K/V heads are never
// repeated. No dropout on the weights (the config refuses dropout with flash). Differentiable in q, k, v.
at::Tensor attention_flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& allowed, int64_t block);

// The same with the mask given by its parts: each block's mask is built when the block is computed (and
// again in backward), so nothing of size Tq x Tk exists at any time, not even in bool.
at::Tensor attention_flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const MaskParts& mask, int64_t block);

}  // namespace causal
