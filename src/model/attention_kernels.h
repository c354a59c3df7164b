// Attention kernels: an explicit reference (scores materialised) and LibTorch's fused op, same contract.
#pragma once

#include <ATen/core/Tensor.h>

namespace causal {

struct AttentionResult {
  at::Tensor out;      // (B,Hq,Tq,dk)
  at::Tensor weights;  // (B,Hq,Tq,Tk) softmax probabilities before dropout; undefined unless requested
};

// A bool mask in the form the two kernels read, prepared once per forward and shared by every layer.
struct PreparedMask {
  at::Tensor allowed;   // (B|1,1,Tq,Tk) bool without an all-false row: a row without keys attends everywhere
  at::Tensor bias;      // same shape in the scores' dtype: 0 where allowed, -inf elsewhere; only if additive
  at::Tensor has_key;   // (B|1,1,Tq,1) 0/1 in that dtype; undefined when every row has an allowed key
  bool causal = false;  // exactly the causal triangle of one sequence: no padding, segments or cache
  // No query may read a key after its own place (Tq == Tk, one uncached sequence; padding and segments only
  // forbid more), so the reference kernel may skip the scores above the diagonal. Rows repaired for having
  // no key do read later ones, but their output is zeroed by has_key whatever they read.
  bool no_future_keys = false;
  bool defined() const { return allowed.defined(); }
};

// additive: also build the bias (the reference kernel adds it to the scores). rows_have_keys: the caller
// knows that every query row has an allowed key (no key padding: each query may read itself), so neither
// the row repair nor the zeroing multiply is needed.
PreparedMask prepare_mask(const at::Tensor& allowed, const at::TensorOptions& scores, bool additive,
                          bool rows_have_keys);

// Shared contract of both kernels:
// - q (B,Hq,Tq,dk), k/v (B,Hkv,Tk,dk) with Hq % Hkv == 0; query head h reads KV head h / (Hq/Hkv).
// - allowed: bool broadcastable to (B,1,Tq,Tk) (see mask.h), true = may attend; undefined = all keys.
// - scores are q.k / sqrt(dk), softmax over keys; forbidden weights are exactly 0.
// - a query row with no allowed key gets exactly zero output, and no NaN in forward or backward.
// - dropout_p > 0 drops attention weights (callers pass 0 outside training).
AttentionResult attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& allowed, double dropout_p, bool want_weights);
// The same with a prepared mask (additive); an undefined one means all keys.
AttentionResult attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const PreparedMask& mask, double dropout_p, bool want_weights);

// Same contract through LibTorch's fused kernel (sdpa_compat.h); it cannot return weights.
at::Tensor attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& allowed, double dropout_p);
at::Tensor attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const PreparedMask& mask, double dropout_p);

}  // namespace causal
