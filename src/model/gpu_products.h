// Matrix products shaped for a GPU's libraries. On the CPU each is the plain product, bit for bit as
// before, except q/k/v under autocast (docs/gpu.md#how-the-products-run-on-a-gpu).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace causal {

// Rows the output head's weight is padded to a multiple of on a GPU.
inline constexpr int64_t kHeadRowMultiple = 64;

// The rows of the output head's (V,D) weight as a GPU's products take it: on a GPU with V not a multiple
// of kHeadRowMultiple, V rounded up to the next multiple; elsewhere V.
int64_t head_rows(const at::Tensor& weight);

// The output head's weight (V,D) and bias (V, or undefined) padded with zero rows (zero entries) to
// head_rows(weight). `padded_weight`, when defined, is the weight already so (a shadow, weight_shadow.h),
// returned in its place.
struct HeadParameters {
  at::Tensor weight, bias;
};
HeadParameters padded_head(const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& padded_weight = at::Tensor());

// The output head: x (..., D) times weight (V, D)^T, plus bias (V) when defined -> (..., V). On a GPU with V
// not a multiple of kHeadRowMultiple (GPT-2's 50257), cuBLAS has only unaligned kernels for these shapes,
// which took 30 of an 82 ms GPT-2-124M step on an H200: there the product runs on the weight padded with
// zero rows (`padded_weight` when given, as padded_head() takes it) and the extra logits are cut off (a
// strided view; the caller's dtype conversion or .contiguous() compacts it).
at::Tensor head_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& padded_weight = at::Tensor());

// The attention's three input projections of the same x: q, k and v. On a GPU, and on the CPU under autocast,
// one product over the stacked weights (x cast once under autocast and kept once for backward, one wider
// kernel forward and backward); each result is then a strided view of it. Biases are all defined or all
// undefined. `stacked`, when defined, is the weights already stacked (a shadow, weight_shadow.h).
std::vector<at::Tensor> qkv_products(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                     const std::vector<at::Tensor>& biases,
                                     const at::Tensor& stacked = at::Tensor());

}  // namespace causal
