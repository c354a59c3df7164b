// Products shaped for a GPU (see gpu_products.h).
#include "model/gpu_products.h"

#include <ATen/ATen.h>

#include "model/autocast_scope.h"

namespace causal {

HeadParameters padded_head(const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t pad = (kHeadRowMultiple - weight.size(0) % kHeadRowMultiple) % kHeadRowMultiple;
  if (!weight.is_cuda() || pad == 0) return {weight, bias};
  return {at::constant_pad_nd(weight, {0, 0, 0, pad}),
          bias.defined() ? at::constant_pad_nd(bias, {0, pad}) : bias};
}

at::Tensor head_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const HeadParameters head = padded_head(weight, bias);
  const at::Tensor logits = at::linear(x, head.weight, head.bias);
  return head.weight.size(0) == weight.size(0) ? logits : logits.narrow(-1, 0, weight.size(0));
}

std::vector<at::Tensor> qkv_products(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                     const std::vector<at::Tensor>& biases) {
  if (!x.is_cuda() && !autocast_enabled(x.device().type())) {
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < weights.size(); ++i) out.push_back(at::linear(x, weights[i], biases[i]));
    return out;
  }
  std::vector<int64_t> widths;
  for (const at::Tensor& w : weights) widths.push_back(w.size(0));
  const at::Tensor bias = biases.front().defined() ? at::cat(biases) : at::Tensor();
  return at::linear(x, at::cat(weights), bias).split_with_sizes(widths, -1);
}

}  // namespace causal
