// Rotary position embedding: the worked example of docs/background.md, relative-offset property, pairings,
// scaling.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <cmath>

#include "config/config.h"
#include "model/rope.h"

using causal::apply_rope;
using causal::RopeConfig;
using causal::RopePairing;
using causal::RopeScaling;

namespace {

constexpr double kPi = 3.14159265358979323846;

RopeConfig rope_config(RopePairing pairing, double theta = 10000.0) {
  RopeConfig c;
  c.theta = theta;
  c.pairing = pairing;
  return c;
}

// Positions (1,T) from a list.
torch::Tensor positions_of(std::vector<int64_t> p) { return torch::tensor(p).view({1, -1}); }

// q.k after rotating q (1,1,1,dk) at position m and k at position n.
double rotated_dot(const torch::Tensor& q, const torch::Tensor& k, int64_t m, int64_t n,
                   const RopeConfig& c) {
  const auto qr = apply_rope(q, positions_of({m}), c);
  const auto kr = apply_rope(k, positions_of({n}), c);
  return (qr * kr).sum().item<double>();
}

}  // namespace

CATCH_TEST_CASE("rope: q=k=(1,0) at positions 1 and 3, pi/4 per position, gives a zero score",
                "[unit][rope]") {
  const auto x = torch::tensor({1.0, 0.0, 1.0, 0.0}, torch::kDouble).view({1, 1, 2, 2});  // (B,H,T,dk=2)

  // The rotation primitive with explicit angles m*pi/4 and n*pi/4.
  const auto angles =
      torch::tensor({1 * kPi / 4, 3 * kPi / 4}, torch::kDouble).view({1, 2, 1});  // (B,T,dk/2)
  const auto tables = causal::rotation_tables(angles, torch::kDouble);
  for (const RopePairing pairing : {RopePairing::kInterleaved, RopePairing::kHalves}) {
    const auto r = causal::rotate_pairs(x, tables, pairing);
    CATCH_CHECK(r[0][0][0][0].item<double>() == Approx(std::cos(kPi / 4)).margin(1e-12));
    CATCH_CHECK(r[0][0][0][1].item<double>() == Approx(std::sin(kPi / 4)).margin(1e-12));
    CATCH_CHECK((r[0][0][0] * r[0][0][1]).sum().item<double>() == Approx(0.0).margin(1e-12));
  }

  // Through apply_rope: with dk = 2 the only pair turns at theta^0 = 1 radian per position, so
  // "linear" scaling with factor 4/pi makes that pi/4 per position.
  RopeConfig c = rope_config(RopePairing::kInterleaved);
  c.scaling = RopeScaling::kLinear;
  c.factor = 4.0 / kPi;
  const auto qk = torch::tensor({1.0f, 0.0f}).view({1, 1, 1, 2});
  CATCH_CHECK(rotated_dot(qk, qk, 1, 3, c) == Approx(0.0).margin(1e-6));
  CATCH_CHECK(rotated_dot(qk, qk, 1, 1, c) == Approx(1.0).margin(1e-6));  // no offset: unchanged
  CATCH_CHECK(rotated_dot(qk, qk, 1, 2, c) == Approx(std::cos(kPi / 4)).margin(1e-6));
}

// Invariant: (R(m)q).(R(n)k) depends only on n - m, for both pairings.
CATCH_TEST_CASE("rope: rotated dot product depends only on the offset", "[contract][rope]") {
  torch::manual_seed(21);
  const auto q = torch::randn({1, 1, 1, 16});
  const auto k = torch::randn({1, 1, 1, 16});
  for (const RopePairing pairing : {RopePairing::kInterleaved, RopePairing::kHalves}) {
    const RopeConfig c = rope_config(pairing, 100.0);
    const double at0 = rotated_dot(q, k, 0, 5, c);
    CATCH_CHECK(rotated_dot(q, k, 3, 8, c) == Approx(at0).margin(1e-4));
    CATCH_CHECK(rotated_dot(q, k, 100, 105, c) == Approx(at0).margin(1e-4));
    // Not vacuous: another offset gives another score, and rotation changed the plain dot product.
    CATCH_CHECK(std::abs(rotated_dot(q, k, 0, 6, c) - at0) > 1e-3);
    CATCH_CHECK(std::abs((q * k).sum().item<double>() - at0) > 1e-3);
  }
}

CATCH_TEST_CASE("rope: pairings preserve norms, follow their layouts and differ", "[unit][rope]") {
  torch::manual_seed(22);
  const auto x = torch::randn({2, 3, 5, 8});
  const auto positions = torch::randint(0, 1000, {2, 5}, torch::kLong);
  const auto inter = apply_rope(x, positions, rope_config(RopePairing::kInterleaved));
  const auto halves = apply_rope(x, positions, rope_config(RopePairing::kHalves));
  CATCH_CHECK(torch::allclose(inter.norm(2, -1), x.norm(2, -1), 1e-5, 1e-5));
  CATCH_CHECK(torch::allclose(halves.norm(2, -1), x.norm(2, -1), 1e-5, 1e-5));
  CATCH_CHECK_FALSE(torch::allclose(inter, halves, 1e-3, 1e-3));

  // Layout by hand for dk = 4, theta = 16 at position 3: pair 0 turns 3 rad, pair 1 turns 3 * 16^(-1/2).
  const auto v = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kDouble).view({1, 1, 1, 4});
  const double a0 = 3.0, a1 = 3.0 / 4.0;
  const auto rot = [](double x1, double x2, double a) {
    return std::make_pair(x1 * std::cos(a) - x2 * std::sin(a), x1 * std::sin(a) + x2 * std::cos(a));
  };
  const auto i = apply_rope(v, positions_of({3}), rope_config(RopePairing::kInterleaved, 16.0)).flatten();
  const auto [i0, i1] = rot(1, 2, a0);  // dims (0,1)
  const auto [i2, i3] = rot(3, 4, a1);  // dims (2,3)
  CATCH_CHECK(torch::allclose(i, torch::tensor({i0, i1, i2, i3}, torch::kDouble), 1e-12, 1e-12));
  const auto h = apply_rope(v, positions_of({3}), rope_config(RopePairing::kHalves, 16.0)).flatten();
  const auto [h0, h2] = rot(1, 3, a0);  // dims (0,2)
  const auto [h1, h3] = rot(2, 4, a1);  // dims (1,3)
  CATCH_CHECK(torch::allclose(h, torch::tensor({h0, h1, h2, h3}, torch::kDouble), 1e-12, 1e-12));
}

// Invariant: the positions passed in are the ones used (not an arange from 0), and shifting every position by
// a constant leaves the q.k scores unchanged.
CATCH_TEST_CASE("rope: given positions are used and a common shift keeps scores", "[contract][rope]") {
  torch::manual_seed(23);
  const auto q = torch::randn({2, 2, 6, 8});
  const auto k = torch::randn({2, 2, 6, 8});
  const auto base = torch::arange(6).view({1, 6}).expand({2, 6});
  const auto shifted = base + 37;
  for (const RopePairing pairing : {RopePairing::kInterleaved, RopePairing::kHalves}) {
    const RopeConfig c = rope_config(pairing);
    const auto scores = [&](const torch::Tensor& p) {
      return torch::matmul(apply_rope(q, p, c), apply_rope(k, p, c).transpose(-2, -1));  // (B,H,T,T)
    };
    CATCH_CHECK(torch::allclose(scores(base), scores(shifted), 1e-4, 1e-4));
    CATCH_CHECK_FALSE(torch::allclose(apply_rope(q, base, c), apply_rope(q, shifted, c), 1e-3, 1e-3));
    // A shift that is not common to all tokens does change the scores.
    const auto uneven = base + torch::tensor({0L, 0L, 0L, 5L, 5L, 5L}).view({1, 6});
    CATCH_CHECK_FALSE(torch::allclose(scores(base), scores(uneven), 1e-3, 1e-3));
  }
}

CATCH_TEST_CASE("rope: linear scaling divides positions by the factor", "[unit][rope]") {
  torch::manual_seed(24);
  const auto x = torch::randn({1, 2, 4, 8}, torch::kDouble);
  const auto p = torch::tensor({3L, 10L, 17L, 400L}).view({1, 4});
  RopeConfig scaled = rope_config(RopePairing::kHalves);
  scaled.scaling = RopeScaling::kLinear;
  scaled.factor = 2.0;
  CATCH_CHECK(torch::allclose(apply_rope(x, p * 2, scaled),
                              apply_rope(x, p, rope_config(RopePairing::kHalves)), 1e-12, 1e-12));
  CATCH_CHECK_FALSE(
      torch::allclose(apply_rope(x, p, scaled), apply_rope(x, p, rope_config(RopePairing::kHalves))));
  CATCH_CHECK_THROWS_AS(apply_rope(torch::randn({1, 1, 2, 3}), positions_of({0, 1}), scaled), c10::Error);
}

// NTK-aware scaling (bloc97, 2023; "dynamic" variants aside) changes the base to theta * s^(dk/(dk-2)).
// dk = 8, theta = 10000, s = 4: base' = 10000 * 4^(4/3) = 63496.042...; pair i turns at base'^(-2i/8):
// pair 0 keeps 1 (it extrapolates) and the last pair is exactly theta^(-6/8) / s = 0.001 / 4.
CATCH_TEST_CASE("rope: ntk scaling changes the base by factor^(dk/(dk-2))", "[unit][rope]") {
  RopeConfig c = rope_config(RopePairing::kInterleaved);
  c.scaling = RopeScaling::kNtk;
  c.factor = 4.0;
  const auto f = causal::rope_inv_freq(8, c);
  const std::vector<double> expected = {1.0, 0.06299605249474366, 0.003968502629920499, 0.00025};
  CATCH_REQUIRE(f.size(0) == 4);
  for (int64_t i = 0; i < 4; ++i) CATCH_CHECK(f[i].item<double>() == Approx(expected[i]).epsilon(1e-12));
  CATCH_CHECK(causal::rope_attention_scale(c) == 1.0);
  // Not vacuous: unscaled frequencies are 1, 0.1, 0.01, 0.001.
  CATCH_CHECK(causal::rope_inv_freq(8, rope_config(RopePairing::kInterleaved))[1].item<double>() ==
              Approx(0.1).epsilon(1e-12));
}

// YaRN (Peng et al., 2023, and its reference code): d(r) = dk ln(L / (2 pi r)) / (2 ln theta) is the pair
// that turns r times over the trained length L; lo = floor(d(beta_fast)), hi = ceil(d(beta_slow)); pairs
// below lo keep theta^(-2i/dk), pairs from hi on are divided by s, a linear ramp in between; q and k are
// scaled by 0.1 ln(s) + 1. dk = 16, theta = 10000, L = 2048, s = 4, betas 32 and 1: d(32) = 2.016 -> lo 2,
// d(1) = 5.026 -> hi 6, so the kept share per pair is 1, 1, 1, .75, .5, .25, 0, 0 and
// inv_freq_i = 10000^(-i/8) * (keep + (1 - keep) / 4).
CATCH_TEST_CASE("rope: yarn interpolates slow pairs, keeps fast ones, and scales attention", "[unit][rope]") {
  RopeConfig c = rope_config(RopePairing::kInterleaved);
  c.scaling = RopeScaling::kYarn;
  c.factor = 4.0;
  c.original_max_seq_len = 2048;
  c.beta_fast = 32.0;
  c.beta_slow = 1.0;
  const auto f = causal::rope_inv_freq(16, c);
  const std::vector<double> expected = {1.0,                                      // keep 1
                                        0.31622776601683794,                      // keep 1
                                        0.1,                                      // keep 1
                                        0.03162277660168379 * (0.75 + 0.0625),    // keep .75
                                        0.01 * (0.5 + 0.125),                     // keep .5
                                        0.0031622776601683794 * (0.25 + 0.1875),  // keep .25
                                        0.001 / 4,                                // interpolated
                                        0.00031622776601683794 / 4};              // interpolated
  CATCH_REQUIRE(f.size(0) == 8);
  for (int64_t i = 0; i < 8; ++i) CATCH_CHECK(f[i].item<double>() == Approx(expected[i]).epsilon(1e-12));
  CATCH_CHECK(causal::rope_attention_scale(c) == Approx(1.138629436111989).epsilon(1e-12));

  // The tables carry the temperature: cos and sin at position 3 of pair 4 are 1.1386 x cos/sin(3 x 0.00625).
  const auto tables = causal::rope_tables(positions_of({0, 3}), 16, c, torch::kDouble);
  CATCH_CHECK(tables.cos[0][0][1][4].item<double>() ==
              Approx(1.138629436111989 * std::cos(3 * 0.00625)).epsilon(1e-12));
  CATCH_CHECK(tables.sin[0][0][1][4].item<double>() ==
              Approx(1.138629436111989 * std::sin(3 * 0.00625)).epsilon(1e-12));
  // So a q.k at equal positions grows by the square of the factor.
  torch::manual_seed(25);
  const auto q = torch::randn({1, 1, 1, 16}, torch::kDouble);
  RopeConfig no_scale = c;
  no_scale.factor = 1.0;  // s = 1: the same frequencies as unscaled and a temperature of 1
  CATCH_CHECK(rotated_dot(q, q, 5, 5, c) ==
              Approx(1.138629436111989 * 1.138629436111989 * (q * q).sum().item<double>()).epsilon(1e-9));
  CATCH_CHECK(rotated_dot(q, q, 5, 5, no_scale) == Approx((q * q).sum().item<double>()).epsilon(1e-9));
}
