// Tiled attention with an online softmax ("flash"): no T x T score or weight tensor, custom backward.
#pragma once

#include <ATen/core/Tensor.h>

#include "model/attention_kernels.h"

namespace causal {

// "flash", the contract of attention_kernels.h computed over key blocks of options.block keys with a running
// maximum, sum and weighted value sum per query row. Float intermediates exist per block only,
// (B,Hq,Tq,block); each block's mask is built from mask.parts() when the block is computed (and again in
// backward), so nothing of size Tq x Tk exists at any time, not even in bool. What backward keeps is q, k,
// v, the output and one log-sum-exp per query row, and it recomputes each block's weights from them. K/V
// heads are never repeated. No dropout on the weights and no weights returned: both are refused (the
// config refuses dropout with flash). Differentiable in q, k, v.
AttentionResult attention_flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const AttentionMask& mask, const KernelOptions& options = {});

}  // namespace causal
