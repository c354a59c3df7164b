// A frozen product weight held in less than float32 (train.lora.base_dtype, docs/finetune.md#base-dtypes):
// bfloat16, or ggml's quantized blocks (io/gguf_quants.h), which the product dequantizes a tile of rows at a
// time into a small float32 buffer, forward and backward, and never whole.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "config/enums.h"

namespace causal {

// Output rows one tile dequantizes at once: (kFrozenTileRows, in) float32, 512 KB for in = 512.
inline constexpr int64_t kFrozenTileRows = 256;

// `weight` (out, in) float32 held in `dtype`: bfloat16 (out, in), or uint8 (out, in / E * B), each row its
// in / E blocks of E elements and B bytes, as ggml lays a row out. Quantized on the CPU only (a GPU weight
// is refused), from the weight's values as they are. f32 returns `weight`.
at::Tensor frozen_storage(const at::Tensor& weight, BaseDtype dtype);

// Rows [start, start + count) of the weight `storage` holds in `dtype`, as float32 (count, in).
at::Tensor frozen_rows(const at::Tensor& storage, BaseDtype dtype, int64_t in, int64_t start, int64_t count);

// The whole weight as float32 (out, in), a fresh tensor: for what takes a weight rather than runs a product
// (a merge, an export, the chunked head loss).
at::Tensor frozen_dense(const at::Tensor& storage, BaseDtype dtype, int64_t in);

// x (..., in) times the held weight (out, in) transposed -> (..., out) in x's dtype, differentiable in x
// only (the weight is frozen: no gradient, and nothing of x kept for one). Forward and backward (dx = dy W)
// each dequantize the weight a tile of kFrozenTileRows rows at a time; products run in x's dtype, so a
// caller under autocast passes x already cast.
at::Tensor frozen_product(const at::Tensor& x, const at::Tensor& storage, BaseDtype dtype, int64_t in);

}  // namespace causal
