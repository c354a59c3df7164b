// Row order of q/k projections for the two RoPE pairings: causal "halves" and transformers' Llama rotate
// dims (i, i + dk/2) of each head, causal "interleaved" and llama.cpp's llama rotate (2i, 2i + 1). The same
// rotation with the rows renumbered gives the same attention scores exactly (only rows move).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace causal {

// `rows` is (heads * dk, ...) or (heads * dk) (a bias), head-major. Row h*dk + 2i + j of the result is row
// h*dk + j*dk/2 + i of the input (j = 0, 1).
at::Tensor halves_to_interleaved(const at::Tensor& rows, int64_t heads);
// The inverse permutation.
at::Tensor interleaved_to_halves(const at::Tensor& rows, int64_t heads);

}  // namespace causal
