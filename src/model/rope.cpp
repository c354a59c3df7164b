// Rotary position embedding (see rope.h).
#include "model/rope.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace causal {

RopeTables rotation_tables(const torch::Tensor& angles, c10::ScalarType dtype) {
  TORCH_CHECK(angles.dim() == 3, "[rope] expected angles (B,T,dk/2), got ", angles.sizes());
  const torch::Tensor a = angles.to(torch::kDouble).unsqueeze(1);  // (B,1,T,dk/2)
  return {a.cos().to(dtype), a.sin().to(dtype)};
}

torch::Tensor rope_inv_freq(int64_t dk, const RopeConfig& config) {
  TORCH_CHECK(dk > 0 && dk % 2 == 0, "[rope] expected an even head dim dk, got ", dk);
  TORCH_CHECK(config.theta > 0.0, "[rope] expected theta > 0, got ", config.theta);
  TORCH_CHECK(config.scaling == RopeScaling::kNone || config.factor > 0.0,
              "[rope] expected scaling factor > 0, got ", config.factor);
  const double s = config.factor;
  const double d = static_cast<double>(dk);
  const torch::Tensor exponent = -torch::arange(0, dk, 2, torch::kDouble) / d;  // (dk/2): -2i/dk
  switch (config.scaling) {
    case RopeScaling::kNone:
    case RopeScaling::kLinear:  // applied to positions in rope_tables, so "linear" stays p / s exactly
      return torch::pow(config.theta, exponent);
    case RopeScaling::kNtk: {
      TORCH_CHECK(dk > 2, "[rope] ntk scaling needs dk > 2, got ", dk);
      return torch::pow(config.theta * std::pow(s, d / (d - 2.0)), exponent);
    }
    case RopeScaling::kYarn: {
      const double length = static_cast<double>(config.original_max_seq_len);
      TORCH_CHECK(length > 0, "[rope] yarn needs original_max_seq_len > 0, got ", length);
      // The pair index that turns `rotations` full circles over the trained length.
      auto pair_turning = [&](double rotations) {
        return d * std::log(length / (rotations * 2.0 * M_PI)) / (2.0 * std::log(config.theta));
      };
      const double lo = std::max(std::floor(pair_turning(config.beta_fast)), 0.0);
      double hi = std::min(std::ceil(pair_turning(config.beta_slow)), d - 1.0);
      if (hi == lo) hi += 0.001;  // the published code's guard against a zero-width ramp
      const torch::Tensor i = torch::arange(0, dk / 2, torch::kDouble);
      const torch::Tensor keep = 1.0 - ((i - lo) / (hi - lo)).clamp(0.0, 1.0);  // 1: extrapolate as trained
      const torch::Tensor base = torch::pow(config.theta, exponent);
      return keep * base + (1.0 - keep) * base / s;
    }
  }
  throw std::logic_error("[rope] unknown scaling");
}

double rope_attention_scale(const RopeConfig& config) {
  if (config.scaling != RopeScaling::kYarn || config.factor <= 1.0) return 1.0;
  return 0.1 * std::log(config.factor) + 1.0;
}

RopeTables rope_tables(const torch::Tensor& positions, int64_t dk, const RopeConfig& config,
                       c10::ScalarType dtype, const torch::Tensor& inv_freq) {
  TORCH_CHECK(positions.defined() && positions.dim() == 2 && positions.scalar_type() == torch::kLong,
              "[rope] expected positions (B,T) int64, got ",
              positions.defined() ? positions.sizes() : c10::IntArrayRef{});
  const torch::Tensor freq =
      inv_freq.defined() ? inv_freq : rope_inv_freq(dk, config).to(positions.device());  // (dk/2)
  torch::Tensor pos = positions.to(torch::kDouble);                                      // (B,T)
  if (config.scaling == RopeScaling::kLinear) pos = pos / config.factor;          // position interpolation
  RopeTables tables = rotation_tables(pos.unsqueeze(-1) * freq, torch::kDouble);  // angles (B,T,dk/2)
  // yarn's temperature: scaling both rotated q and k by m multiplies every logit by m^2.
  const double scale = rope_attention_scale(config);
  if (scale != 1.0) {
    tables.cos = tables.cos * scale;
    tables.sin = tables.sin * scale;
  }
  return {tables.cos.to(dtype), tables.sin.to(dtype)};
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
  torch::Tensor rotated;
  if (pairing == RopePairing::kInterleaved) {
    const torch::Tensor pairs = x.unflatten(-1, {half, 2});                      // (B,H,T,dk/2,2)
    const torch::Tensor x1 = pairs.select(-1, 0);                                // (B,H,T,dk/2)
    const torch::Tensor x2 = pairs.select(-1, 1);                                // (B,H,T,dk/2)
    rotated = torch::stack({x1 * c - x2 * s, x1 * s + x2 * c}, -1).flatten(-2);  // (B,H,T,dk)
  } else {
    const torch::Tensor x1 = x.narrow(-1, 0, half);                // (B,H,T,dk/2)
    const torch::Tensor x2 = x.narrow(-1, half, half);             // (B,H,T,dk/2)
    rotated = torch::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1);  // (B,H,T,dk)
  }
  // Rotated in the tables' precision, returned in x's: under autocast q and k stay bfloat16 like v, which
  // the attention kernels' own products and the flash backward need.
  return rotated.scalar_type() == x.scalar_type() ? rotated : rotated.to(x.scalar_type());
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions, const RopeConfig& config) {
  TORCH_CHECK(x.dim() == 4, "[rope] expected x (B,H,T,dk), got ", x.sizes());
  return rotate_pairs(x, rope_tables(positions, x.size(3), config, x.scalar_type()), config.pairing);
}

}  // namespace causal
