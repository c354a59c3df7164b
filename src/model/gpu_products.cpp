// Products shaped for a GPU (see gpu_products.h).
#include "model/gpu_products.h"

#include <ATen/ATen.h>

#include "model/autocast_scope.h"

namespace causal {

namespace {

// t with zero entries appended along its first dimension up to `rows`.
at::Tensor pad_rows(const at::Tensor& t, int64_t rows) {
  if (!t.defined() || t.size(0) == rows) return t;
  std::vector<int64_t> pad(2 * t.dim(), 0);
  pad.back() = rows - t.size(0);  // constant_pad_nd lists the last dimension first
  return at::constant_pad_nd(t, pad);
}

}  // namespace

int64_t head_rows(const at::Tensor& weight) {
  const int64_t vocab = weight.size(0);
  if (!weight.is_cuda()) return vocab;
  return (vocab + kHeadRowMultiple - 1) / kHeadRowMultiple * kHeadRowMultiple;
}

HeadParameters padded_head(const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& padded_weight) {
  const int64_t rows = head_rows(weight);
  return {padded_weight.defined() ? padded_weight : pad_rows(weight, rows), pad_rows(bias, rows)};
}

at::Tensor head_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& padded_weight) {
  const HeadParameters head = padded_head(weight, bias, padded_weight);
  const at::Tensor logits = at::linear(x, head.weight, head.bias);
  return head.weight.size(0) == weight.size(0) ? logits : logits.narrow(-1, 0, weight.size(0));
}

std::vector<at::Tensor> qkv_products(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                     const std::vector<at::Tensor>& biases, const at::Tensor& stacked) {
  if (!stacked.defined() && !x.is_cuda() && !autocast_enabled(x.device().type())) {
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < weights.size(); ++i) out.push_back(at::linear(x, weights[i], biases[i]));
    return out;
  }
  std::vector<int64_t> widths;
  for (const at::Tensor& w : weights) widths.push_back(w.size(0));
  const at::Tensor bias = biases.front().defined() ? at::cat(biases) : at::Tensor();
  return at::linear(x, stacked.defined() ? stacked : at::cat(weights), bias).split_with_sizes(widths, -1);
}

}  // namespace causal
