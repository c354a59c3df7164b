// Attention kernels and the mask builder: the worked numbers of docs/background.md, mask semantics, kernel
// agreement.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "model/attention_kernels.h"
#include "model/mask.h"
#include "support/tolerance.h"

using causal::attention_reference;
using causal::attention_sdpa;
using causal::build_allowed_mask;
using causal::testing::attention_bounds;
using causal::testing::within;

namespace {

// Independent naive attention: one (batch, head, query) at a time with scalar loops, GQA by h / group.
torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& allowed) {
  const int64_t batch = q.size(0), hq = q.size(1), tq = q.size(2), dk = q.size(3);
  const int64_t hkv = k.size(1), tk = k.size(2);
  auto out = torch::zeros_like(q);
  auto qa = q.accessor<float, 4>();
  auto ka = k.accessor<float, 4>();
  auto va = v.accessor<float, 4>();
  auto oa = out.accessor<float, 4>();
  const torch::Tensor mask = allowed.expand({batch, 1, tq, tk}).contiguous();
  auto ma = mask.accessor<bool, 4>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kv = h / (hq / hkv);
      for (int64_t i = 0; i < tq; ++i) {
        std::vector<double> scores(tk, -std::numeric_limits<double>::infinity());
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < tk; ++j) {
          if (!ma[b][0][i][j]) continue;
          double s = 0;
          for (int64_t c = 0; c < dk; ++c) s += static_cast<double>(qa[b][h][i][c]) * ka[b][kv][j][c];
          scores[j] = s / std::sqrt(static_cast<double>(dk));
          max_score = std::max(max_score, scores[j]);
        }
        if (std::isinf(max_score)) continue;  // no allowed key: zero output
        double total = 0;
        for (int64_t j = 0; j < tk; ++j)
          total += std::isinf(scores[j]) ? 0.0 : std::exp(scores[j] - max_score);
        for (int64_t c = 0; c < dk; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < tk; ++j) {
            if (!std::isinf(scores[j])) acc += std::exp(scores[j] - max_score) / total * va[b][kv][j][c];
          }
          oa[b][h][i][c] = static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

causal::AttentionMask mask_of(const torch::Tensor& query_index, const torch::Tensor& key_index,
                              const torch::Tensor& key_valid = {}, const torch::Tensor& query_segment = {},
                              const torch::Tensor& key_segment = {}, int64_t window = 0) {
  return causal::AttentionMask(
      causal::MaskParts{query_index, key_index, key_valid, query_segment, key_segment, window});
}

causal::AttentionMask causal_mask(int64_t t) { return mask_of(torch::arange(t), torch::arange(t)); }

}  // namespace

CATCH_TEST_CASE("attention: the documented two-token example, fully computed", "[unit][attention]") {
  // dk = 1, Q = K = [1,0]^T, V = [10,20]^T.
  const auto q = torch::tensor({1.0f, 0.0f}).view({1, 1, 2, 1});  // (B,H,T,dk)
  const auto v = torch::tensor({10.0f, 20.0f}).view({1, 1, 2, 1});
  // Every key allowed through the mask: both queries stand after both keys.
  const auto all = mask_of(torch::full({2}, 1, torch::kLong), torch::arange(2));

  const auto unmasked = attention_reference(q, q, v, all, {0.0, true});
  CATCH_CHECK(unmasked.weights[0][0][0][0].item<float>() == Approx(0.73106).margin(1e-4));
  CATCH_CHECK(unmasked.weights[0][0][0][1].item<float>() == Approx(0.26894).margin(1e-4));
  CATCH_CHECK(unmasked.weights[0][0][1][0].item<float>() == Approx(0.5).margin(1e-4));
  CATCH_CHECK(unmasked.weights[0][0][1][1].item<float>() == Approx(0.5).margin(1e-4));
  CATCH_CHECK(unmasked.out[0][0][0][0].item<float>() == Approx(12.6894).margin(1e-4));
  CATCH_CHECK(unmasked.out[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));
  // Undefined mask = every key allowed.
  CATCH_CHECK(torch::equal(attention_reference(q, q, v, causal::AttentionMask()).out, unmasked.out));

  const auto causal = attention_reference(q, q, v, causal_mask(2), {0.0, true});
  CATCH_CHECK(causal.weights[0][0][0][0].item<float>() == 1.0f);
  CATCH_CHECK(causal.weights[0][0][0][1].item<float>() == 0.0f);
  CATCH_CHECK(causal.out[0][0][0][0].item<float>() == Approx(10.0).margin(1e-4));
  CATCH_CHECK(causal.out[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));

  const auto fused_unmasked = attention_sdpa(q, q, v, all).out;
  const auto fused_causal = attention_sdpa(q, q, v, causal_mask(2)).out;
  CATCH_CHECK(fused_unmasked[0][0][0][0].item<float>() == Approx(12.6894).margin(1e-4));
  CATCH_CHECK(fused_unmasked[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));
  CATCH_CHECK(fused_causal[0][0][0][0].item<float>() == Approx(10.0).margin(1e-4));
  CATCH_CHECK(fused_causal[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));
}

CATCH_TEST_CASE("mask: causal, padding, segments and rectangular cached queries", "[unit][mask]") {
  // Square causal, diagonal included.
  const auto causal = causal_mask(3).allowed();
  CATCH_REQUIRE(causal.sizes() == torch::IntArrayRef({1, 1, 3, 3}));
  CATCH_CHECK(torch::equal(causal[0][0], torch::ones({3, 3}, torch::kBool).tril()));

  // Padding: key 0 of row 1 is padding; nobody in row 1 may read it.
  const auto valid = torch::tensor({true, true, true, false, true, true}).view({2, 3});
  const auto padded = build_allowed_mask(torch::arange(3), torch::arange(3), valid, {}, {});
  CATCH_REQUIRE(padded.sizes() == torch::IntArrayRef({2, 1, 3, 3}));
  const auto expected_row1 =
      torch::tensor({false, false, false, false, true, false, false, true, true}).view({3, 3});
  CATCH_CHECK(torch::equal(padded[1][0], expected_row1));
  CATCH_CHECK(torch::equal(padded[0][0], causal[0][0]));

  // Segments: two documents packed in one row; the second starts at index 2.
  const auto seg = torch::tensor({0L, 0L, 1L, 1L}).view({1, 4});
  const auto packed = build_allowed_mask(torch::arange(4), torch::arange(4), {}, seg, seg);
  const auto expected_packed = torch::tensor({true, false, false, false, true, true, false, false,  //
                                              false, false, true, false, false, false, true, true})
                                   .view({4, 4});
  CATCH_CHECK(torch::equal(packed[0][0], expected_packed));

  // Cached decoding of 2 new tokens after 3 cached: queries 3,4 against keys 0..4.
  const auto rect = build_allowed_mask(torch::arange(3, 5), torch::arange(5), {}, {}, {});
  CATCH_REQUIRE(rect.sizes() == torch::IntArrayRef({1, 1, 2, 5}));
  const auto expected_rect =
      torch::tensor({true, true, true, true, false, true, true, true, true, true}).view({2, 5});
  CATCH_CHECK(torch::equal(rect[0][0], expected_rect));

  CATCH_CHECK_THROWS_AS(build_allowed_mask(torch::arange(3), torch::arange(3), {}, seg, {}), c10::Error);
}

// Invariant: under causal + padding + segment masks every row with an allowed key sums to 1, every forbidden
// weight is exactly 0, and both kernels agree with an independent naive implementation.
CATCH_TEST_CASE("attention: rows sum to 1 and forbidden weights are exactly 0",
                "[contract][attention][numerics]") {
  torch::manual_seed(3);
  const int64_t batch = 2, hq = 4, hkv = 2, t = 6, dk = 8;
  const auto q = torch::randn({batch, hq, t, dk});
  const auto k = torch::randn({batch, hkv, t, dk});
  const auto v = torch::randn({batch, hkv, t, dk});
  // Row 0: two packed documents [0,0,0,1,1,1]; row 1: one document, the last two keys padding.
  const auto seg = torch::tensor({0L, 0L, 0L, 1L, 1L, 1L, 0L, 0L, 0L, 0L, 0L, 0L}).view({batch, t});
  const auto valid = torch::tensor({true, true, true, true, true, true, true, true, true, true, false, false})
                         .view({batch, t});
  const auto mask = mask_of(torch::arange(t), torch::arange(t), valid, seg, seg);  // (B,1,T,T);
  const auto allowed = mask.allowed();                                             // (B,1,T,T)
  // Not vacuous: each kind of mask forbids something a plain causal mask would allow.
  const auto causal = causal_mask(t).allowed();
  CATCH_REQUIRE(causal.logical_and(allowed.logical_not()).any().item<bool>());
  CATCH_REQUIRE(allowed[0][0][4][1].item<bool>() == false);  // other segment
  CATCH_REQUIRE(allowed[1][0][5][4].item<bool>() == false);  // padding key

  const auto r = attention_reference(q, k, v, mask, {0.0, true});
  const auto expanded = allowed.expand_as(r.weights);
  const auto bound = attention_bounds(q, k, v, allowed, {});
  CATCH_CHECK(within(r.weights.sum(-1), torch::ones({batch, hq, t}), bound.row_sum, "row sums"));
  CATCH_CHECK(r.weights.masked_select(expanded.logical_not()).eq(0).all().item<bool>());
  CATCH_CHECK(r.weights.masked_select(expanded).gt(0).all().item<bool>());

  const auto naive = naive_attention(q, k, v, allowed);
  CATCH_CHECK(within(r.out, naive, bound.out, "reference"));
  CATCH_CHECK(within(attention_sdpa(q, k, v, mask).out, naive, bound.out, "sdpa"));
}

// Invariant: the fused kernel equals the explicit reference on the documented masked batch (seed 11,
// B,H,T,D = 2,2,5,4, lengths [5,3]), and one-query-at-a-time cached attention equals the full causal pass.
CATCH_TEST_CASE("attention: sdpa equals reference on the documented masked batch",
                "[contract][attention][numerics]") {
  torch::manual_seed(11);
  const int64_t batch = 2, heads = 2, t = 5, d = 4;
  const auto q = torch::randn({batch, heads, t, d});
  const auto k = torch::randn({batch, heads, t, d});
  const auto v = torch::randn({batch, heads, t, d});
  const auto lengths = torch::tensor({5L, 3L});
  const auto keys_valid = torch::arange(t).unsqueeze(0) < lengths.unsqueeze(1);  // (B,T)
  const auto mask = mask_of(torch::arange(t), torch::arange(t), keys_valid);
  const auto allowed = mask.allowed();  // (B,1,T,T)

  // The reference computation, written out here.
  const auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  const auto seed_weights =
      scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity()).softmax(-1);
  const auto seed_reference = torch::matmul(seed_weights, v);

  const auto reference = attention_reference(q, k, v, mask, {0.0, true});
  const auto fused = attention_sdpa(q, k, v, mask).out;
  const auto bound = attention_bounds(q, k, v, allowed, {});
  CATCH_CHECK(within(reference.out, seed_reference, bound.out, "reference"));
  CATCH_CHECK(within(fused, reference.out, bound.out, "sdpa"));
  CATCH_CHECK(within(reference.weights.sum(-1), torch::ones({batch, heads, t}), bound.row_sum, "row sums"));
  CATCH_CHECK(reference.weights.masked_select(allowed.expand_as(reference.weights).logical_not())
                  .eq(0)
                  .all()
                  .item<bool>());
  CATCH_CHECK(torch::isfinite(fused).all().item<bool>());
  // Not vacuous: padding changed row 1's late queries relative to plain causal attention.
  const auto unpadded = attention_reference(q, k, v, causal_mask(t)).out;
  CATCH_REQUIRE_FALSE(torch::allclose(unpadded[1], reference.out[1], 1e-3, 1e-3));

  // At decode step i, all cached keys 0..i are valid predecessors of the one query (rectangular mask).
  const auto full = attention_reference(q, k, v, causal_mask(t)).out;
  std::vector<torch::Tensor> pieces_ref, pieces_fused;
  for (int64_t i = 0; i < t; ++i) {
    const auto step = mask_of(torch::arange(i, i + 1), torch::arange(i + 1));
    const auto qi = q.narrow(2, i, 1), ki = k.narrow(2, 0, i + 1), vi = v.narrow(2, 0, i + 1);
    pieces_ref.push_back(attention_reference(qi, ki, vi, step).out);
    pieces_fused.push_back(attention_sdpa(qi, ki, vi, step).out);
  }
  // Each step's keys are a prefix of the full pass's: the full pass's bound covers it.
  const auto full_bound = attention_bounds(q, k, v, causal_mask(t).allowed(), {}).out;
  CATCH_CHECK(within(torch::cat(pieces_ref, 2), full, full_bound, "cached reference"));
  CATCH_CHECK(within(torch::cat(pieces_fused, 2), full, full_bound, "cached sdpa"));
}

CATCH_TEST_CASE("attention: GQA query head h reads KV head h / (Hq/Hkv)", "[unit][attention][numerics]") {
  torch::manual_seed(5);
  const int64_t hq = 6, hkv = 2, t = 4, dk = 4;
  const auto q = torch::randn({1, hq, t, dk});
  const auto k = torch::randn({1, hkv, t, dk});
  const auto v = torch::randn({1, hkv, t, dk});
  const auto mask = causal_mask(t);
  const auto out = attention_reference(q, k, v, mask).out;
  const auto bound = attention_bounds(q, k, v, mask.allowed(), {}).out;
  for (int64_t h = 0; h < hq; ++h) {
    const int64_t kv = h / (hq / hkv);
    const auto single =
        attention_reference(q.narrow(1, h, 1), k.narrow(1, kv, 1), v.narrow(1, kv, 1), mask).out;
    CATCH_CHECK(within(single, out.narrow(1, h, 1), bound.narrow(1, h, 1), "head " + std::to_string(h)));
  }
  CATCH_CHECK(within(attention_sdpa(q, k, v, mask).out, out, bound, "sdpa"));
  CATCH_CHECK(within(naive_attention(q, k, v, mask.allowed()), out, bound, "naive"));
}

// Invariant: a query row with no allowed key outputs exactly zero, with no NaN in forward or backward.
CATCH_TEST_CASE("attention: a fully masked query row gives zeros and finite gradients",
                "[contract][attention]") {
  torch::manual_seed(7);
  const int64_t t = 4;
  // Row 0 of batch 0 is a padding query whose only causal key (itself) is padding.
  const auto valid = torch::tensor({false, true, true, true}).view({1, t});
  const auto mask = mask_of(torch::arange(t), torch::arange(t), valid);
  const auto allowed = mask.allowed();  // (B,1,T,T)
  CATCH_REQUIRE_FALSE(allowed[0][0][0].any().item<bool>());

  for (const bool fused : {false, true}) {
    CATCH_SECTION(fused ? "sdpa" : "reference") {
      const auto q = torch::randn({1, 2, t, 4}, torch::requires_grad());
      const auto k = torch::randn({1, 2, t, 4}, torch::requires_grad());
      const auto v = torch::randn({1, 2, t, 4}, torch::requires_grad());
      const auto out = fused ? attention_sdpa(q, k, v, mask).out : attention_reference(q, k, v, mask).out;
      CATCH_CHECK(torch::equal(out.select(2, 0), torch::zeros({1, 2, 4})));
      CATCH_CHECK(torch::isfinite(out).all().item<bool>());
      CATCH_REQUIRE(out.select(2, 1).abs().sum().item<float>() > 0);  // other rows carry signal
      (out * torch::randn_like(out)).sum().backward();
      for (const auto& g : {q.grad(), k.grad(), v.grad()}) {
        CATCH_REQUIRE(g.defined());
        CATCH_CHECK(torch::isfinite(g).all().item<bool>());
      }
      CATCH_CHECK(
          torch::equal(q.grad().select(2, 0), torch::zeros({1, 2, 4})));  // masked query learns nothing
      if (!fused) {
        const auto w = attention_reference(q, k, v, mask, {0.0, true}).weights;
        CATCH_CHECK(torch::equal(w.select(2, 0), torch::zeros({1, 2, t})));
      }
    }
  }
}

CATCH_TEST_CASE("attention: dropout on weights only when dropout_p > 0", "[unit][attention]") {
  torch::manual_seed(9);
  const auto q = torch::randn({1, 2, 5, 4});
  const auto k = torch::randn({1, 2, 5, 4});
  const auto v = torch::randn({1, 2, 5, 4});
  const auto mask = causal_mask(5);
  const auto a = attention_reference(q, k, v, mask).out;
  CATCH_CHECK(torch::equal(a, attention_reference(q, k, v, mask).out));
  CATCH_CHECK_FALSE(torch::allclose(a, attention_reference(q, k, v, mask, {0.5}).out));
  CATCH_CHECK_FALSE(
      torch::allclose(attention_sdpa(q, k, v, mask).out, attention_sdpa(q, k, v, mask, {0.5}).out));
}

// "query_blocks" splits the queries in two when no query may read a later key: the first half reads only the
// first half of the keys. Output and gradients stay the reference's, up to the order of float32 sums, under
// segments, padding, a row without keys and GQA.
CATCH_TEST_CASE("attention: query_blocks gives the reference's output and gradients",
                "[contract][attention][numerics]") {
  torch::manual_seed(13);
  const int64_t batch = 2, hq = 4, hkv = 2, t = 256, dk = 8;
  auto segments = torch::zeros({batch, t}, torch::kLong);
  segments[0].narrow(0, 100, 80).fill_(1);
  segments[0].narrow(0, 180, t - 180).fill_(2);
  auto valid = torch::ones({batch, t}, torch::kBool);
  valid[1][0] = false;  // query 0 of row 1 has no key
  valid[1].narrow(0, t - 30, 30).fill_(false);
  const auto mask = mask_of(torch::arange(t), torch::arange(t), valid, segments, segments);
  const auto q = torch::randn({batch, hq, t, dk}, torch::requires_grad());
  const auto k = torch::randn({batch, hkv, t, dk}, torch::requires_grad());
  const auto v = torch::randn({batch, hkv, t, dk}, torch::requires_grad());
  const auto upstream = torch::randn({batch, hq, t, dk});

  const auto run = [&](causal::AttentionKernel kernel) {
    const auto out = kernel(q, k, v, mask, {}).out;
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {upstream});
    return std::make_pair(out.detach(), grads);
  };
  const auto [whole, whole_grads] = run(causal::attention_kernel(causal::AttentionKind::kReference));
  const auto [halves, halves_grads] = run(causal::attention_kernel(causal::AttentionKind::kQueryBlocks));
  const auto bound = attention_bounds(q, k, v, mask.allowed(), upstream);
  CATCH_CHECK(within(halves, whole, bound.out, "out"));
  CATCH_CHECK(within(halves_grads[0], whole_grads[0], bound.dq, "dq"));
  CATCH_CHECK(within(halves_grads[1], whole_grads[1], bound.dk, "dk"));
  CATCH_CHECK(within(halves_grads[2], whole_grads[2], bound.dv, "dv"));
  CATCH_CHECK(torch::equal(halves[1].select(1, 0), torch::zeros({hq, dk})));  // the row without keys
  CATCH_CHECK(torch::equal(halves_grads[0][1].select(1, 0), torch::zeros({hq, dk})));
}

// The first half really leaves the later keys out: with NaN in the second half's keys and values, the
// reference's first rows turn NaN (a NaN score plus -inf is NaN), the halves' first rows do not. In bf16 the
// halves match the whole bf16 product to bf16 rounding.
CATCH_TEST_CASE("attention: query_blocks reads only the keys up to each half's last row",
                "[unit][attention]") {
  torch::manual_seed(17);
  const int64_t t = 64, dk = 8;
  const auto mask = causal_mask(t);
  const auto query_blocks = causal::attention_kernel(causal::AttentionKind::kQueryBlocks);
  const auto q = torch::randn({2, 3, t, dk}), k = torch::randn({2, 3, t, dk}),
             v = torch::randn({2, 3, t, dk});
  const auto k_nan = k.clone(), v_nan = v.clone();
  k_nan.narrow(2, t / 2, t / 2).fill_(std::numeric_limits<float>::quiet_NaN());
  v_nan.narrow(2, t / 2, t / 2).fill_(std::numeric_limits<float>::quiet_NaN());
  const auto halves = query_blocks(q, k_nan, v_nan, mask, {}).out;
  CATCH_CHECK(torch::isfinite(halves.narrow(2, 0, t / 2)).all().item<bool>());
  CATCH_CHECK(
      torch::equal(halves.narrow(2, 0, t / 2), query_blocks(q, k, v, mask, {}).out.narrow(2, 0, t / 2)));
  CATCH_CHECK_FALSE(
      torch::isfinite(attention_reference(q, k_nan, v_nan, mask).out.narrow(2, 0, t / 2)).all().item<bool>());

  const auto qb = q.to(torch::kBFloat16), kb = k.to(torch::kBFloat16), vb = v.to(torch::kBFloat16);
  const auto in_halves = query_blocks(qb, kb, vb, mask, {}).out.to(torch::kFloat);
  const auto scores = torch::matmul(qb, kb.transpose(-2, -1)).to(torch::kFloat) / std::sqrt(8.0);
  const auto in_whole =
      torch::matmul(scores.masked_fill(mask.allowed().logical_not(), -std::numeric_limits<float>::infinity())
                        .softmax(-1)
                        .to(torch::kBFloat16),
                    vb)
          .to(torch::kFloat);
  // Each value is a weighted mean of |v| <= max|v|, rounded to bf16 a few times on either side.
  const double magnitude = v.abs().max().item<double>();
  CATCH_CHECK(causal::testing::allclose(in_halves, in_whole, 4 * causal::testing::kEpsBf16 * magnitude, 0.0,
                                        "bf16 halves"));
}

// A sliding window of w keys: each query reads itself and its w - 1 predecessors, within its own document,
// cached or not; the mask agrees with its definition cell by cell, and every kernel with the reference.
CATCH_TEST_CASE("mask: a sliding window reads the latest window keys, and every kernel agrees",
                "[contract][attention][mask][numerics]") {
  const int64_t t = 7, window = 3;
  const auto seg = torch::tensor({0L, 0L, 0L, 0L, 0L, 1L, 1L}).view({1, t});
  const auto allowed = mask_of(torch::arange(t), torch::arange(t), {}, seg, seg, window).allowed();
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < t; ++j) {
      const bool expected =
          j <= i && i - j < window && seg[0][i].item<int64_t>() == seg[0][j].item<int64_t>();
      CATCH_CHECK(allowed[0][0][i][j].item<bool>() == expected);
    }
  }
  // Cached: queries 5, 6 against keys 0..6 read keys 3..5 and 4..6.
  const auto rect = mask_of(torch::arange(5, 7), torch::arange(7), {}, {}, {}, window).allowed();
  CATCH_CHECK(torch::equal(rect[0][0].nonzero().select(1, 1), torch::tensor({3L, 4L, 5L, 4L, 5L, 6L})));
  // A window of 0 is no window; one at least T long forbids nothing more.
  CATCH_CHECK(torch::equal(mask_of(torch::arange(t), torch::arange(t), {}, {}, {}, t).allowed(),
                           causal_mask(t).allowed()));

  torch::manual_seed(19);
  const int64_t batch = 2, hq = 4, hkv = 2, length = 40, dk = 8;
  auto valid = torch::ones({batch, length}, torch::kBool);
  valid[1].narrow(0, length - 6, 6).fill_(false);
  const auto mask = mask_of(torch::arange(length), torch::arange(length), valid, {}, {}, 5);
  CATCH_REQUIRE_FALSE(mask.causal());
  const auto q = torch::randn({batch, hq, length, dk}, torch::requires_grad());
  const auto k = torch::randn({batch, hkv, length, dk}, torch::requires_grad());
  const auto v = torch::randn({batch, hkv, length, dk}, torch::requires_grad());
  const auto upstream = torch::randn({batch, hq, length, dk});
  const auto bound = attention_bounds(q, k, v, mask.allowed(), upstream);
  const auto naive = naive_attention(q.detach(), k.detach(), v.detach(), mask.allowed());
  const auto reference = attention_reference(q, k, v, mask).out;
  CATCH_CHECK(within(reference, naive, bound.out, "reference vs naive"));
  const auto reference_grads = torch::autograd::grad({reference}, {q, k, v}, {upstream});
  for (const auto kind :
       {causal::AttentionKind::kSdpa, causal::AttentionKind::kFlash, causal::AttentionKind::kQueryBlocks}) {
    causal::KernelOptions options;
    options.block = 8;
    const auto out = causal::attention_kernel(kind)(q, k, v, mask, options).out;
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {upstream});
    const std::string name = causal::to_string(kind);
    CATCH_CHECK(within(out, reference, bound.out, name));
    CATCH_CHECK(within(grads[0], reference_grads[0], bound.dq, name + " dq"));
    CATCH_CHECK(within(grads[1], reference_grads[1], bound.dk, name + " dk"));
    CATCH_CHECK(within(grads[2], reference_grads[2], bound.dv, name + " dv"));
  }
}
