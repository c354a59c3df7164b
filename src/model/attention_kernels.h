// Attention kernels: an explicit reference (scores materialised) and LibTorch's fused op, same contract.
#pragma once

#include <ATen/core/Tensor.h>

namespace causal {

struct AttentionResult {
  at::Tensor out;      // (B,Hq,Tq,dk)
  at::Tensor weights;  // (B,Hq,Tq,Tk) softmax probabilities before dropout; undefined unless requested
};

// Shared contract of both kernels:
// - q (B,Hq,Tq,dk), k/v (B,Hkv,Tk,dk) with Hq % Hkv == 0; query head h reads KV head h / (Hq/Hkv).
// - allowed: bool broadcastable to (B,1,Tq,Tk) (see mask.h), true = may attend; undefined = all keys.
// - scores are q.k / sqrt(dk), softmax over keys; forbidden weights are exactly 0.
// - a query row with no allowed key gets exactly zero output, and no NaN in forward or backward.
// - dropout_p > 0 drops attention weights (callers pass 0 outside training).
AttentionResult attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& allowed, double dropout_p, bool want_weights);

// Same contract through LibTorch's fused kernel (sdpa_compat.h); it cannot return weights.
at::Tensor attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& allowed, double dropout_p);

}  // namespace causal
