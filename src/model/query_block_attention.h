// Reference attention over query blocks that read only the keys up to their own last row, for masks that
// allow no key after its query: the scores above the diagonal blocks are never computed.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace causal {

// softmax(q3 k3^T + bias) v3 over query blocks: q3 (B*H,T,dk) already scaled, k3 and v3 (B*H,T,dk) with
// equal head counts, bias (B|1,1,T,T) additive (0 or -inf) in q3's dtype, of a mask that allows no key
// after its query (in rows whose output the caller keeps). Block i of `blocks`, rows [i*T/blocks,
// (i+1)*T/blocks), reads keys [0, its last row]: the weights left out would be exactly 0, so the output is
// the full product's. Returns (B*H,T,dk). Differentiable in q3, k3 and v3, not in the bias; backward keeps
// each block's weights (q3's dtype) and writes dK and dV prefix by prefix, with no zero-filled gradient per
// block.
// The scores of queries [start, start + rows) of q3 (B*H,Tq,dk) against keys [0, keys) of k3 (B*H,Tk,dk),
// plus the matching block of the additive bias (B|1,1,Tq,Tk): (B*H, rows, keys) in the bias's dtype. The
// product accumulates (beta = 1) into a fresh copy of the bias, never the bias itself, which every layer
// and later batches of the shape share. An in-place product is not autocast: the bias comes in the dtype q
// and k arrive in.
at::Tensor biased_scores(const at::Tensor& q3, const at::Tensor& k3, const at::Tensor& bias, int64_t batch,
                         int64_t start, int64_t rows, int64_t keys);

at::Tensor attention_query_blocks(const at::Tensor& q3, const at::Tensor& k3, const at::Tensor& v3,
                                  const at::Tensor& bias, int64_t batch, int64_t blocks);

}  // namespace causal
