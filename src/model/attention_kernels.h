// Attention kernels behind one interface: the reference (the plain masked composition) and LibTorch's
// fused op, plus the opt-in extras "flash" (flash_attention.h) and "query_blocks"
// (query_block_attention.h). Every kernel reads the one mask type of mask.h.
#pragma once

#include <ATen/core/Tensor.h>

#include "config/enums.h"
#include "model/mask.h"

namespace causal {

struct AttentionResult {
  at::Tensor out;      // (B,Hq,Tq,dk)
  at::Tensor weights;  // (B,Hq,Tq,Tk) softmax probabilities before dropout; undefined unless requested
};

// The contract every kernel keeps:
// - q (B,Hq,Tq,dk), k/v (B,Hkv,Tk,dk) with Hq % Hkv == 0; query head h reads KV head h / (Hq/Hkv).
// - mask: Tq queries against Tk keys (see mask.h); undefined = every key.
// - scores are q.k / sqrt(dk), softmax over keys; forbidden weights are exactly 0.
// - a query row with no allowed key gets exactly zero output, and no NaN in forward or backward.
struct KernelOptions {
  double dropout_p = 0.0;     // > 0 drops attention weights (callers pass 0 outside training)
  bool want_weights = false;  // also return the weights; only the reference can, the others refuse
  int64_t block = 64;         // keys per block of "flash"
};
using AttentionKernel = AttentionResult (*)(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                            const AttentionMask& mask, const KernelOptions& options);

// The kernel `kind` names; config validation has checked its other settings.
AttentionKernel attention_kernel(AttentionKind kind);

// Scores materialised: bias + (q / sqrt(dk)) k^T, softmax accumulated in float, dropout, times v.
AttentionResult attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const AttentionMask& mask, const KernelOptions& options = {});

// LibTorch's fused kernel (sdpa_compat.h); it cannot return weights.
AttentionResult attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionMask& mask, const KernelOptions& options = {});

// Shared by the kernels: the argument checks, and K/V heads repeated to Hq (GQA).
void check_attention_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const AttentionMask& mask);
at::Tensor repeat_kv(const at::Tensor& x, int64_t query_heads);
// The scores of queries [start, start + rows) of q3 (B*H,Tq,dk), already scaled, against keys [0, keys) of
// k3 (B*H,Tk,dk), plus the matching block of the additive bias (B|1,1,Tq,Tk): (B*H, rows, keys) in the
// bias's dtype. The product accumulates (beta = 1) into a fresh copy of the bias, never the bias itself,
// which every layer and later batches of the shape share. An in-place product is not autocast: the bias
// comes in the dtype q and k arrive in.
at::Tensor biased_scores(const at::Tensor& q3, const at::Tensor& k3, const at::Tensor& bias, int64_t batch,
                         int64_t start, int64_t rows, int64_t keys);

}  // namespace causal
