// Tensors <-> the raw little-endian element bytes that GGUF stores, in F32, F16 or BF16.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_file.h"

namespace causal {

// `tensor` (any float dtype) cast to `type` (round to nearest even), row-major bytes.
std::string tensor_bytes(const at::Tensor& tensor, GgufTensorType type);
// The float32 tensor of `shape` held in `bytes` of `type` (widening is exact).
at::Tensor tensor_from_bytes(const std::string& bytes, const std::vector<int64_t>& shape,
                             GgufTensorType type);

// The tensor dtype of an F32, F16 or BF16 GGUF type.
at::ScalarType scalar_type_of(GgufTensorType type);

// "f32" | "f16" | "bf16" -> the GGUF type; anything else is a UsageError naming --dtype.
GgufTensorType parse_export_dtype(const std::string& dtype);

}  // namespace causal
