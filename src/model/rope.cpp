// Rotary position embedding (see rope.h).
#include "model/rope.h"

#include <torch/torch.h>

namespace causal {

RopeTables rotation_tables(const torch::Tensor& angles, c10::ScalarType dtype) {
  TORCH_CHECK(angles.dim() == 3, "[rope] expected angles (B,T,dk/2), got ", angles.sizes());
  const torch::Tensor a = angles.to(torch::kDouble).unsqueeze(1);  // (B,1,T,dk/2)
  return {a.cos().to(dtype), a.sin().to(dtype)};
}

RopeTables rope_tables(const torch::Tensor& positions, int64_t dk, const RopeConfig& config,
                       c10::ScalarType dtype) {
  TORCH_CHECK(positions.defined() && positions.dim() == 2 && positions.scalar_type() == torch::kLong,
              "[rope] expected positions (B,T) int64, got ",
              positions.defined() ? positions.sizes() : c10::IntArrayRef{});
  TORCH_CHECK(dk > 0 && dk % 2 == 0, "[rope] expected an even head dim dk, got ", dk);
  TORCH_CHECK(config.theta > 0.0, "[rope] expected theta > 0, got ", config.theta);
  const auto options = torch::TensorOptions().dtype(torch::kDouble).device(positions.device());
  // Pair i's frequency theta^(-2i/dk).
  const torch::Tensor inv_freq =
      torch::pow(config.theta, -torch::arange(0, dk, 2, options) / static_cast<double>(dk));  // (dk/2)
  torch::Tensor pos = positions.to(torch::kDouble);                                           // (B,T)
  if (config.scaling == RopeScaling::kLinear) {
    TORCH_CHECK(config.factor > 0.0, "[rope] expected scaling factor > 0, got ", config.factor);
    pos = pos / config.factor;  // position interpolation
  }
  return rotation_tables(pos.unsqueeze(-1) * inv_freq, dtype);  // angles (B,T,dk/2)
}

torch::Tensor rotate_pairs(const torch::Tensor& x, const RopeTables& tables, RopePairing pairing) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0, "[rope] expected x (B,H,T,dk) with even dk, got ",
              x.sizes());
  TORCH_CHECK(tables.defined() && tables.cos.dim() == 4 && tables.cos.size(2) == x.size(2) &&
                  tables.cos.size(3) * 2 == x.size(3),
              "[rope] expected tables (B,1,T,dk/2) for x ", x.sizes(), ", got ",
              tables.defined() ? tables.cos.sizes() : c10::IntArrayRef{});
  const int64_t half = x.size(3) / 2;
  const torch::Tensor& c = tables.cos;  // (B,1,T,dk/2)
  const torch::Tensor& s = tables.sin;  // (B,1,T,dk/2)
  if (pairing == RopePairing::kInterleaved) {
    const torch::Tensor pairs = x.unflatten(-1, {half, 2});                   // (B,H,T,dk/2,2)
    const torch::Tensor x1 = pairs.select(-1, 0);                             // (B,H,T,dk/2)
    const torch::Tensor x2 = pairs.select(-1, 1);                             // (B,H,T,dk/2)
    return torch::stack({x1 * c - x2 * s, x1 * s + x2 * c}, -1).flatten(-2);  // (B,H,T,dk)
  }
  const torch::Tensor x1 = x.narrow(-1, 0, half);             // (B,H,T,dk/2)
  const torch::Tensor x2 = x.narrow(-1, half, half);          // (B,H,T,dk/2)
  return torch::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1);  // (B,H,T,dk)
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions, const RopeConfig& config) {
  TORCH_CHECK(x.dim() == 4, "[rope] expected x (B,H,T,dk), got ", x.sizes());
  return rotate_pairs(x, rope_tables(positions, x.size(3), config, x.scalar_type()), config.pairing);
}

}  // namespace causal
