// Rotary position embedding (RoPE): rotates coordinate pairs of q and k by position-dependent angles.
#pragma once

#include <ATen/core/Tensor.h>

#include "config/model_config.h"

namespace causal {

// cos/sin of every pair's angle, broadcast over heads. Pair i of a token at position p turns by
// p * rope_inv_freq(dk, config)[i]; with scaling "yarn" both tables also carry rope_attention_scale.
struct RopeTables {
  at::Tensor cos;  // (B,1,T,dk/2)
  at::Tensor sin;  // (B,1,T,dk/2)
  bool defined() const { return cos.defined(); }
};

// Tables for explicit angles (B,T,dk/2) in radians: computed in double, then cast to `dtype`.
RopeTables rotation_tables(const at::Tensor& angles, c10::ScalarType dtype);

// Pair i's angle per position, (dk/2) double, after scaling (docs/model.md#rope-scaling), s = factor:
//   none:   theta^(-2i/dk)
//   linear: theta^(-2i/dk) / s                          (position interpolation)
//   ntk:    (theta * s^(dk/(dk-2)))^(-2i/dk)            (base change; pair 0 unchanged, the last pair / s)
//   yarn:   ramp(i) * theta^(-2i/dk) + (1 - ramp(i)) * theta^(-2i/dk) / s, ramp(i) = 1 - clamp((i - lo) /
//           (hi - lo), 0, 1) with lo = floor(d(beta_fast)), hi = ceil(d(beta_slow)) clamped to [0, dk-1],
//           d(r) = dk ln(original_max_seq_len / (2 pi r)) / (2 ln theta): the pair that turns r times over
//           the trained length. Fast pairs keep their frequency, slow ones are interpolated.
at::Tensor rope_inv_freq(int64_t dk, const RopeConfig& config);

// The factor yarn puts on q and on k (so on the logits squared): 0.1 ln(s) + 1 for s > 1, else 1; 1 for
// the other scalings.
double rope_attention_scale(const RopeConfig& config);

// Tables for absolute positions (B,T) int64 and head dim dk (even). Angles are computed in double so
// that large positions keep their precision, then cast to `dtype`. `inv_freq`, when given, is
// rope_inv_freq(dk, config) already on the positions' device (made once by a caller that runs many forwards).
RopeTables rope_tables(const at::Tensor& positions, int64_t dk, const RopeConfig& config,
                       c10::ScalarType dtype, const at::Tensor& inv_freq = {});

// Rotates x (B,H,T,dk) by the tables with R(a) = [[cos a, -sin a], [sin a, cos a]] on each pair:
// "interleaved" pairs dims (2i, 2i+1), "halves" pairs (i, i + dk/2). Pair i uses column i of the tables.
at::Tensor rotate_pairs(const at::Tensor& x, const RopeTables& tables, RopePairing pairing);

// rope_tables + rotate_pairs. Applied to Q and K only, never V.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& positions, const RopeConfig& config);

}  // namespace causal
