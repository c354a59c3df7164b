// Per-head row permutations between the two RoPE pairings.
#include "interop/qk_layout.h"

#include <ATen/ATen.h>

#include <vector>

namespace causal {
namespace {

// (H*dk, rest...) viewed as (H, a, b, rest...), the a and b axes swapped, and flattened back.
at::Tensor swap_within_heads(const at::Tensor& rows, int64_t heads, bool halves_first) {
  const int64_t dk = rows.size(0) / heads;
  std::vector<int64_t> view = {heads, halves_first ? 2 : dk / 2, halves_first ? dk / 2 : 2};
  for (int64_t d = 1; d < rows.dim(); ++d) view.push_back(rows.size(d));
  return rows.reshape(view).transpose(1, 2).contiguous().reshape(rows.sizes());
}

}  // namespace

at::Tensor halves_to_interleaved(const at::Tensor& rows, int64_t heads) {
  return swap_within_heads(rows, heads, /*halves_first=*/true);
}

at::Tensor interleaved_to_halves(const at::Tensor& rows, int64_t heads) {
  return swap_within_heads(rows, heads, /*halves_first=*/false);
}

}  // namespace causal
