// Rotary position embedding (RoPE): rotates coordinate pairs of q and k by position-dependent angles.
#pragma once

#include <ATen/core/Tensor.h>

#include "config/model_config.h"

namespace causal {

// cos/sin of every pair's angle, broadcast over heads. Pair i of a token at position p turns by
// p' * theta^(-2i/dk), p' = p (scaling "none") or p / factor (scaling "linear").
struct RopeTables {
  at::Tensor cos;  // (B,1,T,dk/2)
  at::Tensor sin;  // (B,1,T,dk/2)
  bool defined() const { return cos.defined(); }
};

// Tables for explicit angles (B,T,dk/2) in radians: computed in double, then cast to `dtype`.
RopeTables rotation_tables(const at::Tensor& angles, c10::ScalarType dtype);

// Tables for absolute positions (B,T) int64 and head dim dk (even). Angles are computed in double so
// that large positions keep their precision, then cast to `dtype`.
RopeTables rope_tables(const at::Tensor& positions, int64_t dk, const RopeConfig& config,
                       c10::ScalarType dtype);

// Rotates x (B,H,T,dk) by the tables with R(a) = [[cos a, -sin a], [sin a, cos a]] on each pair:
// "interleaved" pairs dims (2i, 2i+1), "halves" pairs (i, i + dk/2). Pair i uses column i of the tables.
at::Tensor rotate_pairs(const at::Tensor& x, const RopeTables& tables, RopePairing pairing);

// rope_tables + rotate_pairs. Applied to Q and K only, never V.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const RopeConfig& config);

}  // namespace causal
