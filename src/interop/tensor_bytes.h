// Tensors <-> the raw little-endian bytes that GGUF stores: F32, F16 and BF16 elements, and ggml's
// quantized blocks (every type io/gguf_quants decodes in; Q8_0 out).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_file.h"

namespace causal {

// `tensor` (any float dtype) as `type`, row-major bytes: F32/F16/BF16 cast (round to nearest even); Q8_0
// quantized row by row as ggml and gguf-py do (a 2-D tensor whose rows are whole 32-element blocks, of
// finite values). Any other quantized type is a UsageError.
std::string tensor_bytes(const at::Tensor& tensor, GgufTensorType type);
// The float32 tensor of `shape` held in `bytes` of `type`, any type read_gguf accepts: widened exactly, or
// dequantized bit for bit as gguf-py does. Throws DataError when the bytes do not fit the shape.
at::Tensor tensor_from_bytes(const std::string& bytes, const std::vector<int64_t>& shape,
                             GgufTensorType type);

// What a GGUF export asking for `requested` stores `tensor` as: 1-D tensors (norms, biases) F32, as
// llama.cpp applies them; under Q8_0, a matrix whose rows are not whole 32-element blocks F16, as
// llama.cpp's convert_hf_to_gguf.py falls back; otherwise `requested`.
GgufTensorType gguf_storage_type(const at::Tensor& tensor, GgufTensorType requested);

// The tensor dtype of an F32, F16 or BF16 GGUF type; a quantized type has none (UsageError: HF folders and
// checkpoints hold f32, f16 or bf16).
at::ScalarType scalar_type_of(GgufTensorType type);

// "f32" | "f16" | "bf16" | "q8_0" -> the GGUF type; anything else is a UsageError naming --dtype.
GgufTensorType parse_export_dtype(const std::string& dtype);

}  // namespace causal
