// Test helper: the values train.lora.base_dtype holds a float32 weight as, computed apart from
// model/frozen_weight: bfloat16's rounding, or io/gguf_quants' quantizer and dequantizer over the whole
// tensor at once.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "config/enums.h"
#include "io/gguf_quants.h"

namespace causal::testing {

inline torch::Tensor held_values(const torch::Tensor& w, BaseDtype dtype) {
  if (dtype == BaseDtype::kF32) return w.detach().clone();
  if (dtype == BaseDtype::kBf16) return w.detach().to(torch::kBFloat16).to(torch::kFloat);
  static const std::map<BaseDtype, GgufTensorType> types = {{BaseDtype::kQ8_0, GgufTensorType::kQ8_0},
                                                            {BaseDtype::kQ4_0, GgufTensorType::kQ4_0},
                                                            {BaseDtype::kQ4_1, GgufTensorType::kQ4_1},
                                                            {BaseDtype::kQ4_K, GgufTensorType::kQ4_K}};
  const torch::Tensor c = w.detach().contiguous();
  const std::string blocks = gguf_quantize(types.at(dtype), c.data_ptr<float>(), c.numel());
  torch::Tensor out = torch::empty_like(c);
  gguf_dequantize(types.at(dtype), reinterpret_cast<const uint8_t*>(blocks.data()), c.numel(),
                  out.data_ptr<float>());
  return out;
}

}  // namespace causal::testing
