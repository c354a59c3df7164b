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
#include "model/query_block_attention.h"
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

torch::Tensor causal_mask(int64_t t) {
  return build_allowed_mask(torch::arange(t), torch::arange(t), {}, {}, {});
}

}  // namespace

CATCH_TEST_CASE("attention: the documented two-token example, fully computed", "[unit][attention]") {
  // dk = 1, Q = K = [1,0]^T, V = [10,20]^T.
  const auto q = torch::tensor({1.0f, 0.0f}).view({1, 1, 2, 1});  // (B,H,T,dk)
  const auto v = torch::tensor({10.0f, 20.0f}).view({1, 1, 2, 1});
  const auto all = torch::ones({1, 1, 2, 2}, torch::kBool);

  const auto unmasked = attention_reference(q, q, v, all, 0.0, true);
  CATCH_CHECK(unmasked.weights[0][0][0][0].item<float>() == Approx(0.73106).margin(1e-4));
  CATCH_CHECK(unmasked.weights[0][0][0][1].item<float>() == Approx(0.26894).margin(1e-4));
  CATCH_CHECK(unmasked.weights[0][0][1][0].item<float>() == Approx(0.5).margin(1e-4));
  CATCH_CHECK(unmasked.weights[0][0][1][1].item<float>() == Approx(0.5).margin(1e-4));
  CATCH_CHECK(unmasked.out[0][0][0][0].item<float>() == Approx(12.6894).margin(1e-4));
  CATCH_CHECK(unmasked.out[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));
  // Undefined mask = every key allowed.
  CATCH_CHECK(torch::equal(attention_reference(q, q, v, torch::Tensor(), 0.0, false).out, unmasked.out));

  const auto causal = attention_reference(q, q, v, causal_mask(2), 0.0, true);
  CATCH_CHECK(causal.weights[0][0][0][0].item<float>() == 1.0f);
  CATCH_CHECK(causal.weights[0][0][0][1].item<float>() == 0.0f);
  CATCH_CHECK(causal.out[0][0][0][0].item<float>() == Approx(10.0).margin(1e-4));
  CATCH_CHECK(causal.out[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));

  const auto fused_unmasked = attention_sdpa(q, q, v, all, 0.0);
  const auto fused_causal = attention_sdpa(q, q, v, causal_mask(2), 0.0);
  CATCH_CHECK(fused_unmasked[0][0][0][0].item<float>() == Approx(12.6894).margin(1e-4));
  CATCH_CHECK(fused_unmasked[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));
  CATCH_CHECK(fused_causal[0][0][0][0].item<float>() == Approx(10.0).margin(1e-4));
  CATCH_CHECK(fused_causal[0][0][1][0].item<float>() == Approx(15.0).margin(1e-4));
}

CATCH_TEST_CASE("mask: causal, padding, segments and rectangular cached queries", "[unit][mask]") {
  // Square causal, diagonal included.
  const auto causal = causal_mask(3);
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
  const auto allowed = build_allowed_mask(torch::arange(t), torch::arange(t), valid, seg, seg);  // (B,1,T,T)
  // Not vacuous: each kind of mask forbids something a plain causal mask would allow.
  const auto causal = causal_mask(t);
  CATCH_REQUIRE(causal.logical_and(allowed.logical_not()).any().item<bool>());
  CATCH_REQUIRE(allowed[0][0][4][1].item<bool>() == false);  // other segment
  CATCH_REQUIRE(allowed[1][0][5][4].item<bool>() == false);  // padding key

  const auto r = attention_reference(q, k, v, allowed, 0.0, true);
  const auto expanded = allowed.expand_as(r.weights);
  const auto bound = attention_bounds(q, k, v, allowed, {});
  CATCH_CHECK(within(r.weights.sum(-1), torch::ones({batch, hq, t}), bound.row_sum, "row sums"));
  CATCH_CHECK(r.weights.masked_select(expanded.logical_not()).eq(0).all().item<bool>());
  CATCH_CHECK(r.weights.masked_select(expanded).gt(0).all().item<bool>());

  const auto naive = naive_attention(q, k, v, allowed);
  CATCH_CHECK(within(r.out, naive, bound.out, "reference"));
  CATCH_CHECK(within(attention_sdpa(q, k, v, allowed, 0.0), naive, bound.out, "sdpa"));
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
  const auto allowed = build_allowed_mask(torch::arange(t), torch::arange(t), keys_valid, {}, {});

  // The reference computation, written out here.
  const auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  const auto seed_weights =
      scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity()).softmax(-1);
  const auto seed_reference = torch::matmul(seed_weights, v);

  const auto reference = attention_reference(q, k, v, allowed, 0.0, true);
  const auto fused = attention_sdpa(q, k, v, allowed, 0.0);
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
  const auto unpadded = attention_reference(q, k, v, causal_mask(t), 0.0, false).out;
  CATCH_REQUIRE_FALSE(torch::allclose(unpadded[1], reference.out[1], 1e-3, 1e-3));

  // At decode step i, all cached keys 0..i are valid predecessors of the one query (rectangular mask).
  const auto full = attention_reference(q, k, v, causal_mask(t), 0.0, false).out;
  std::vector<torch::Tensor> pieces_ref, pieces_fused;
  for (int64_t i = 0; i < t; ++i) {
    const auto mask = build_allowed_mask(torch::arange(i, i + 1), torch::arange(i + 1), {}, {}, {});
    const auto qi = q.narrow(2, i, 1), ki = k.narrow(2, 0, i + 1), vi = v.narrow(2, 0, i + 1);
    pieces_ref.push_back(attention_reference(qi, ki, vi, mask, 0.0, false).out);
    pieces_fused.push_back(attention_sdpa(qi, ki, vi, mask, 0.0));
  }
  // Each step's keys are a prefix of the full pass's: the full pass's bound covers it.
  const auto full_bound = attention_bounds(q, k, v, causal_mask(t), {}).out;
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
  const auto out = attention_reference(q, k, v, mask, 0.0, false).out;
  const auto bound = attention_bounds(q, k, v, mask, {}).out;
  for (int64_t h = 0; h < hq; ++h) {
    const int64_t kv = h / (hq / hkv);
    const auto single =
        attention_reference(q.narrow(1, h, 1), k.narrow(1, kv, 1), v.narrow(1, kv, 1), mask, 0.0, false).out;
    CATCH_CHECK(within(single, out.narrow(1, h, 1), bound.narrow(1, h, 1), "head " + std::to_string(h)));
  }
  CATCH_CHECK(within(attention_sdpa(q, k, v, mask, 0.0), out, bound, "sdpa"));
  CATCH_CHECK(within(naive_attention(q, k, v, mask), out, bound, "naive"));
}

// Invariant: a query row with no allowed key outputs exactly zero, with no NaN in forward or backward.
CATCH_TEST_CASE("attention: a fully masked query row gives zeros and finite gradients",
                "[contract][attention]") {
  torch::manual_seed(7);
  const int64_t t = 4;
  // Row 0 of batch 0 is a padding query whose only causal key (itself) is padding.
  const auto valid = torch::tensor({false, true, true, true}).view({1, t});
  const auto allowed = build_allowed_mask(torch::arange(t), torch::arange(t), valid, {}, {});
  CATCH_REQUIRE_FALSE(allowed[0][0][0].any().item<bool>());

  for (const bool fused : {false, true}) {
    CATCH_SECTION(fused ? "sdpa" : "reference") {
      const auto q = torch::randn({1, 2, t, 4}, torch::requires_grad());
      const auto k = torch::randn({1, 2, t, 4}, torch::requires_grad());
      const auto v = torch::randn({1, 2, t, 4}, torch::requires_grad());
      const auto out = fused ? attention_sdpa(q, k, v, allowed, 0.0)
                             : attention_reference(q, k, v, allowed, 0.0, false).out;
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
        const auto w = attention_reference(q, k, v, allowed, 0.0, true).weights;
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
  const auto a = attention_reference(q, k, v, mask, 0.0, false).out;
  CATCH_CHECK(torch::equal(a, attention_reference(q, k, v, mask, 0.0, false).out));
  CATCH_CHECK_FALSE(torch::allclose(a, attention_reference(q, k, v, mask, 0.5, false).out));
  CATCH_CHECK_FALSE(torch::allclose(attention_sdpa(q, k, v, mask, 0.0), attention_sdpa(q, k, v, mask, 0.5)));
}

// A mask that allows no later key lets the reference kernel split the queries in two at T >= 256: the first
// half reads only the first half of the keys. Output and gradients stay the whole product's, up to the order
// of float32 sums, under segments, padding, a row without keys and GQA.
CATCH_TEST_CASE("attention: query halves give the whole product's output and gradients",
                "[contract][attention][numerics]") {
  torch::manual_seed(13);
  const int64_t batch = 2, hq = 4, hkv = 2, t = 256, dk = 8;
  auto segments = torch::zeros({batch, t}, torch::kLong);
  segments[0].narrow(0, 100, 80).fill_(1);
  segments[0].narrow(0, 180, t - 180).fill_(2);
  auto valid = torch::ones({batch, t}, torch::kBool);
  valid[1][0] = false;  // query 0 of row 1 has no key
  valid[1].narrow(0, t - 30, 30).fill_(false);
  const auto allowed = build_allowed_mask(torch::arange(t), torch::arange(t), valid, segments, segments);
  const auto q = torch::randn({batch, hq, t, dk}, torch::requires_grad());
  const auto k = torch::randn({batch, hkv, t, dk}, torch::requires_grad());
  const auto v = torch::randn({batch, hkv, t, dk}, torch::requires_grad());
  const auto upstream = torch::randn({batch, hq, t, dk});

  const auto run = [&](bool no_future_keys) {
    causal::PreparedMask mask = causal::prepare_mask(allowed, q.options(), /*additive=*/true,
                                                     /*rows_have_keys=*/false);
    mask.no_future_keys = no_future_keys;
    const auto out = attention_reference(q, k, v, mask, 0.0, false).out;
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {upstream});
    return std::make_pair(out.detach(), grads);
  };
  const auto [whole, whole_grads] = run(false);
  const auto [halves, halves_grads] = run(true);
  const auto bound = attention_bounds(q, k, v, allowed, upstream);
  CATCH_CHECK(within(halves, whole, bound.out, "out"));
  CATCH_CHECK(within(halves_grads[0], whole_grads[0], bound.dq, "dq"));
  CATCH_CHECK(within(halves_grads[1], whole_grads[1], bound.dk, "dk"));
  CATCH_CHECK(within(halves_grads[2], whole_grads[2], bound.dv, "dv"));
  CATCH_CHECK(torch::equal(halves[1].select(1, 0), torch::zeros({hq, dk})));  // the row without keys
  CATCH_CHECK(torch::equal(halves_grads[0][1].select(1, 0), torch::zeros({hq, dk})));
}

// The blocks really leave the later keys out: under a mask that does allow them (here none at all), the
// block kernel's first rows differ from the whole product's, and its last block, which reads every key, does
// not. Four blocks in bf16 match the whole bf16 product to bf16 rounding.
CATCH_TEST_CASE("attention: query blocks read only the keys up to their own last row", "[unit][attention]") {
  torch::manual_seed(17);
  const int64_t rows = 6, t = 64, dk = 8;
  const auto q3 = torch::randn({rows, t, dk}), k3 = torch::randn({rows, t, dk}),
             v3 = torch::randn({rows, t, dk});
  const auto open = torch::zeros({1, 1, t, t});  // every key allowed
  const auto blocks = causal::attention_query_blocks(q3, k3, v3, open, /*batch=*/2, /*blocks=*/4);
  const auto whole = torch::matmul(torch::softmax(torch::matmul(q3, k3.transpose(1, 2)), -1), v3);
  CATCH_CHECK_FALSE(torch::allclose(blocks.narrow(1, 0, t / 4), whole.narrow(1, 0, t / 4), 1e-2, 1e-2));
  CATCH_CHECK(
      torch::allclose(blocks.narrow(1, 3 * t / 4, t / 4), whole.narrow(1, 3 * t / 4, t / 4), 1e-5, 1e-5));

  const auto causal_bias = causal::prepare_mask(causal_mask(t), q3.options().dtype(torch::kBFloat16),
                                                /*additive=*/true, /*rows_have_keys=*/true)
                               .bias;
  const auto qb = q3.to(torch::kBFloat16), kb = k3.to(torch::kBFloat16), vb = v3.to(torch::kBFloat16);
  const auto in_blocks = causal::attention_query_blocks(qb, kb, vb, causal_bias, 2, 4).to(torch::kFloat);
  const auto in_whole = torch::matmul(torch::softmax(torch::matmul(qb, kb.transpose(1, 2)).to(torch::kFloat) +
                                                         causal_bias.squeeze(0).to(torch::kFloat),
                                                     -1)
                                          .to(torch::kBFloat16),
                                      vb)
                            .to(torch::kFloat);
  // Each value is a weighted mean of |v| <= max|v|, rounded to bf16 a few times on either side.
  const double magnitude = v3.abs().max().item<double>();
  CATCH_CHECK(causal::testing::allclose(in_blocks, in_whole, 4 * causal::testing::kEpsBf16 * magnitude, 0.0,
                                        "bf16 blocks"));
}
