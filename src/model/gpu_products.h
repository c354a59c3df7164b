// Matrix products shaped for a GPU's libraries. On the CPU each is the plain product, bit for bit as
// before, except q/k/v under autocast (docs/gpu.md#how-the-products-run-on-a-gpu).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace causal {

// Rows the output head's weight is padded to a multiple of on a GPU.
inline constexpr int64_t kHeadRowMultiple = 64;

// The output head's weight (V,D) and bias (V, or undefined) as a GPU's products take them: on a GPU with V
// not a multiple of kHeadRowMultiple, padded with zero rows (zero entries) to the next multiple; elsewhere
// as they are.
struct HeadParameters {
  at::Tensor weight, bias;
};
HeadParameters padded_head(const at::Tensor& weight, const at::Tensor& bias);

// The output head: x (..., D) times weight (V, D)^T, plus bias (V) when defined -> (..., V). On a GPU with V
// not a multiple of kHeadRowMultiple (GPT-2's 50257), cuBLAS has only unaligned kernels for these shapes,
// which took 30 of an 82 ms GPT-2-124M step on an H200: there the product runs on the weight padded with
// zero rows and the extra logits are cut off (a strided view; the caller's dtype conversion or
// .contiguous() compacts it).
at::Tensor head_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The attention's three input projections of the same x: q, k and v. On a GPU, and on the CPU under autocast,
// one product over the stacked weights (x cast once under autocast and kept once for backward, one wider
// kernel forward and backward); each result is then a strided view of it. Biases are all defined or all
// undefined.
std::vector<at::Tensor> qkv_products(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                     const std::vector<at::Tensor>& biases);

}  // namespace causal
