// "query_blocks": the reference over two halves of the queries, for masks that allow no key after its
// query: the scores above the diagonal blocks are never computed.
#pragma once

#include <ATen/core/Tensor.h>

#include "model/attention_kernels.h"

namespace causal {

// The contract of attention_kernels.h. When no query may read a later key (mask.no_future_keys()), with no
// dropout and no weights asked for, half h of the queries, rows [h*T/2, (h+1)*T/2), reads keys [0, its last
// row]: the weights left out would be exactly 0, so the output is the whole product's up to the order of
// float sums. Backward keeps each half's weights (q's dtype) and writes dK and dV prefix by prefix, with no
// zero-filled gradient per half. Anything else runs the reference.
AttentionResult attention_query_blocks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const AttentionMask& mask, const KernelOptions& options = {});

}  // namespace causal
