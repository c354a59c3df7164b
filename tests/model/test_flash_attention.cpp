// The "flash" kernel (tiled online softmax, custom backward) against the explicit reference: outputs and
// gradients over shapes, masks and block sizes; fully masked rows; the whole model; KV-cache decoding.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "model/attention.h"
#include "model/attention_kernels.h"
#include "model/flash_attention.h"
#include "model/kv_cache.h"
#include "model/mask.h"
#include "model/transformer.h"
#include "support/small_model.h"
#include "support/tolerance.h"

using namespace causal;

// Helper names differ from the other test files': the folder compiles as one unity source.
namespace {

double largest_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

using testing::within;

struct FlashShape {
  int64_t batch, query_heads, kv_heads, queries, keys, dk;
};

// One random case: a causal mask over `keys` keys whose queries are the last `queries` indices (queries <
// keys is the cached-decoding rectangle), with random key padding and/or random segments.
MaskParts random_case_parts(const FlashShape& s, bool padding, bool segments) {
  const torch::Tensor key_index = torch::arange(s.keys);
  const torch::Tensor query_index = torch::arange(s.keys - s.queries, s.keys);
  torch::Tensor valid, key_segment, query_segment;
  if (padding) valid = torch::rand({s.batch, s.keys}) > 0.25;  // (B,Tk)
  if (segments) {
    // Non-decreasing ids: a new document starts at each key with probability 0.2.
    key_segment = (torch::rand({s.batch, s.keys}) < 0.2).to(torch::kLong).cumsum(1);  // (B,Tk)
    query_segment = key_segment.narrow(1, s.keys - s.queries, s.queries);             // (B,Tq)
  }
  return {query_index, key_index, valid, query_segment, key_segment};
}

torch::Tensor random_case_mask(const FlashShape& s, bool padding, bool segments) {
  return random_case_parts(s, padding, segments).build();  // (B|1,1,Tq,Tk)
}

struct FlashGradients {
  torch::Tensor out, dq, dk, dv;
};

// Output and dQ, dK, dV through autograd for one upstream gradient. Flash builds its block masks from the
// mask's parts: the whole mask never exists.
FlashGradients run_kernel(bool flash, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const AttentionMask& mask, const torch::Tensor& upstream, int64_t block) {
  const auto qq = q.detach().requires_grad_(true);
  const auto kk = k.detach().requires_grad_(true);
  const auto vv = v.detach().requires_grad_(true);
  KernelOptions options;
  options.block = block;
  const torch::Tensor out =
      (flash ? attention_flash(qq, kk, vv, mask, options) : attention_reference(qq, kk, vv, mask)).out;
  (out * upstream).sum().backward();
  return {out.detach(), qq.grad(), kk.grad(), vv.grad()};
}

// Flash against the reference within the attention bounds of these inputs (tolerance.h (3)).
void check_same(const FlashGradients& flash, const FlashGradients& reference, const torch::Tensor& q,
                const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed,
                const torch::Tensor& upstream) {
  const testing::AttentionBounds bound = testing::attention_bounds(q, k, v, allowed, upstream);
  CATCH_CHECK(within(flash.out, reference.out, bound.out, "out"));
  CATCH_CHECK(within(flash.dq, reference.dq, bound.dq, "dq"));
  CATCH_CHECK(within(flash.dk, reference.dk, bound.dk, "dk"));
  CATCH_CHECK(within(flash.dv, reference.dv, bound.dv, "dv"));
}

void copy_weights(const Transformer& from, const Transformer& to) {
  torch::NoGradGuard no_grad;
  auto target = to->named_parameters();
  for (const auto& item : from->named_parameters()) target[item.key()].copy_(item.value());
}

}  // namespace

// Invariant: flash computes the same attention as the explicit reference, forward and backward (dQ, dK, dV),
// for every head grouping, head width, block size (1, not dividing T, larger than T), batch size, cached
// rectangle and mask kind; GQA gradients summed per KV head.
CATCH_TEST_CASE("flash: outputs and gradients equal the reference over shapes, masks and blocks",
                "[contract][attention][flash][numerics]") {
  torch::manual_seed(41);
  const std::vector<FlashShape> shapes = {
      {1, 4, 4, 1, 1, 8},   {2, 4, 2, 7, 7, 16},  {3, 4, 1, 17, 17, 8}, {2, 4, 4, 40, 40, 16},
      {1, 4, 2, 70, 70, 8}, {2, 4, 1, 5, 23, 16}, {3, 4, 4, 1, 30, 8},  {2, 4, 2, 9, 9, 8},
  };
  int64_t cases = 0, beyond_causal = 0;
  for (const int64_t block : {1, 3, 16, 64}) {
    for (const FlashShape& s : shapes) {
      for (const int mask_kind : {0, 1, 2, 3}) {  // causal, + padding, + segments, + both
        const bool padding = (mask_kind & 1) != 0, segments = (mask_kind & 2) != 0;
        CATCH_INFO("block " << block << " B " << s.batch << " Hq/Hkv " << s.query_heads << "/" << s.kv_heads
                            << " Tq/Tk " << s.queries << "/" << s.keys << " dk " << s.dk << " padding "
                            << padding << " segments " << segments);
        const auto q = torch::randn({s.batch, s.query_heads, s.queries, s.dk});
        const auto k = torch::randn({s.batch, s.kv_heads, s.keys, s.dk});
        const auto v = torch::randn({s.batch, s.kv_heads, s.keys, s.dk});
        const auto upstream = torch::randn({s.batch, s.query_heads, s.queries, s.dk});
        const AttentionMask mask(random_case_parts(s, padding, segments));
        const auto allowed = mask.parts().build();
        const FlashGradients reference = run_kernel(false, q, k, v, mask, upstream, block);
        check_same(run_kernel(true, q, k, v, mask, upstream, block), reference, q, k, v, allowed, upstream);
        if (allowed.any().item<bool>()) {
          CATCH_CHECK(reference.out.abs().max().item<double>() > 1e-3);  // not vacuous: real signal
        }
        const auto plain = random_case_mask(s, false, false);
        beyond_causal += plain.logical_and(allowed.logical_not()).any().item<bool>() ? 1 : 0;
        ++cases;
      }
    }
  }
  CATCH_CHECK(cases == 4 * 8 * 4);
  CATCH_CHECK(beyond_causal > cases / 2);  // padding and segments really forbade causal keys

  // No mask at all: every key allowed.
  const auto q = torch::randn({2, 4, 6, 8});
  const auto k = torch::randn({2, 2, 6, 8});
  const auto v = torch::randn({2, 2, 6, 8});
  const auto upstream = torch::randn({2, 4, 6, 8});
  check_same(run_kernel(true, q, k, v, {}, upstream, 4), run_kernel(false, q, k, v, {}, upstream, 4), q, k, v,
             {}, upstream);
}

// Invariant: a query with no allowed key gets exactly zero output and exactly zero gradient, and no NaN
// reaches any gradient, also when whole key blocks are skipped or the row's only blocks are all forbidden.
CATCH_TEST_CASE("flash: fully masked rows give exact zeros and finite zero gradients",
                "[contract][attention][flash][numerics]") {
  torch::manual_seed(42);
  const int64_t t = 9;
  // Row 0: the first 4 keys are padding, so queries 0..3 have no key. Row 1: all keys valid.
  auto valid = torch::ones({2, t}, torch::kBool);
  valid[0].narrow(0, 0, 4).fill_(false);
  const AttentionMask mask(MaskParts{torch::arange(t), torch::arange(t), valid, {}, {}});
  const auto allowed = mask.allowed();
  CATCH_REQUIRE_FALSE(allowed[0][0].narrow(0, 0, 4).any().item<bool>());
  for (const int64_t block : {1, 2, 3, 64}) {
    CATCH_INFO("block " << block);
    const auto q = torch::randn({2, 4, t, 8});
    const auto k = torch::randn({2, 2, t, 8});
    const auto v = torch::randn({2, 2, t, 8});
    const auto upstream = torch::randn({2, 4, t, 8});
    const FlashGradients flash = run_kernel(true, q, k, v, mask, upstream, block);
    CATCH_CHECK(torch::equal(flash.out[0].narrow(1, 0, 4), torch::zeros({4, 4, 8})));
    CATCH_CHECK(torch::equal(flash.dq[0].narrow(1, 0, 4), torch::zeros({4, 4, 8})));
    // The forbidden padding keys receive nothing either.
    CATCH_CHECK(torch::equal(flash.dk[0].narrow(1, 0, 4), torch::zeros({2, 4, 8})));
    CATCH_CHECK(torch::equal(flash.dv[0].narrow(1, 0, 4), torch::zeros({2, 4, 8})));
    for (const auto& g : {flash.out, flash.dq, flash.dk, flash.dv})
      CATCH_CHECK(torch::isfinite(g).all().item<bool>());
    CATCH_REQUIRE(flash.out[0].narrow(1, 4, t - 4).abs().sum().item<float>() > 0);  // other rows carry signal
    check_same(flash, run_kernel(false, q, k, v, mask, upstream, block), q, k, v, allowed, upstream);
  }
}

// Invariant: flash refuses attention-weight dropout instead of silently training without it, and an
// observer of attention weights still gets them (through the reference kernel).
CATCH_TEST_CASE("flash: no silent dropout, and weights still come from the reference",
                "[unit][flash][numerics]") {
  torch::manual_seed(43);
  Attention attn(AttentionOptions(16, 4, 2).kernel(AttentionKind::kFlash).block(2).dropout(0.1));
  AttentionContext context;
  context.mask = AttentionMask(MaskParts{torch::arange(5), torch::arange(5), {}, {}, {}});
  const auto x = torch::randn({1, 5, 16});
  attn->train();
  CATCH_CHECK_THROWS_WITH(attn->forward(x, context),
                          Catch::Matchers::Contains("no attention-weight dropout"));
  attn->eval();  // dropout applies in training only
  const auto plain = attn->forward(x, context);
  struct Weights : ForwardObserver {
    torch::Tensor seen;
    bool watches(HookPoint point) const override { return point == HookPoint::kAttentionWeights; }
    at::Tensor observe(const HookSite&, const at::Tensor& value) override { return seen = value; }
  } weights;
  ForwardHooks hooks;
  const ForwardHooks::Registration watching(hooks, weights);
  context.hooks = &hooks;
  const auto probed = attn->forward(x, context);
  CATCH_REQUIRE(weights.seen.defined());
  // The same sub-layer on another kernel (tolerance.h (4)): its reductions, at the scale of its output.
  CATCH_CHECK(within(probed, plain,
                     testing::chain_bound(testing::attention_path(16, 4, 5), plain.abs().max()), "out"));
  CATCH_CHECK_THROWS_AS(attention_flash(torch::randn({1, 2, 3, 4}), torch::randn({1, 2, 3, 4}),
                                        torch::randn({1, 2, 3, 4}), AttentionMask(), {0.0, true}),
                        c10::Error);
}

// Invariant: swapping the kernel of a whole Transformer to flash (same weights) changes neither the logits
// nor any parameter gradient, on a packed batch with two documents, padding and fully masked queries.
CATCH_TEST_CASE("flash: a Transformer with flash equals one with reference",
                "[contract][model][flash][numerics]") {
  torch::manual_seed(44);
  const int64_t time = 12;
  Transformer reference(testing::small_text_model(AttentionKind::kReference, 5));
  Transformer flash(testing::small_text_model(AttentionKind::kFlash, 5));
  copy_weights(reference, flash);
  const auto tokens = torch::randint(0, 11, {2, time}, torch::kLong);
  // Row 0: documents of 7 and 5 tokens, positions restarting. Row 1: one document of 8, then 4 padding.
  const auto segments = torch::tensor({1L, 1L, 1L, 1L, 1L, 1L, 1L, 2L, 2L, 2L, 2L, 2L,
                                       1L, 1L, 1L, 1L, 1L, 1L, 1L, 1L, 0L, 0L, 0L, 0L})
                            .view({2, time});
  const auto positions = torch::tensor({0L, 1L, 2L, 3L, 4L, 5L, 6L, 0L, 1L, 2L, 3L, 4L,
                                        0L, 1L, 2L, 3L, 4L, 5L, 6L, 7L, 0L, 0L, 0L, 0L})
                             .view({2, time});
  const auto valid = segments > 0;
  const ModelInputs inputs{tokens, positions, segments, valid};
  const auto weights = torch::randn({2, time, 11});  // a loss that reads every logit

  const auto a = reference->forward(inputs).logits;
  const auto b = flash->forward(inputs).logits;
  const ModelConfig& config = reference->config();
  CATCH_CHECK(within(b, a, testing::logits_bound(config, a, time, 8), "logits"));
  (a * weights).sum().backward();
  (b * weights).sum().backward();
  auto flash_parameters = flash->named_parameters();
  for (const auto& item : reference->named_parameters()) {
    CATCH_INFO(item.key());
    const torch::Tensor& g = flash_parameters[item.key()].grad();
    CATCH_REQUIRE(g.defined());
    CATCH_CHECK(torch::isfinite(g).all().item<bool>());
    CATCH_CHECK(within(g, item.value().grad(),
                       testing::gradient_bound(config, item.value().grad(), time, time, 8, 2 * time),
                       item.key()));
  }
  // Not vacuous: the segment ids matter (without them document 2 would read document 1).
  torch::NoGradGuard no_grad;
  const auto unsegmented = flash->forward({tokens, positions, {}, valid}).logits;
  CATCH_CHECK(largest_diff(unsegmented[0].narrow(0, 7, 5), b[0].narrow(0, 7, 5)) > 1e-4);
}

// Invariant: KV-cache decoding with flash (rectangular masks, Tq < Tk) in chunks of any size gives the full
// pass's logits, which equal the reference kernel's, also with left padding and packed segments.
CATCH_TEST_CASE("flash: cached chunks equal the full pass", "[contract][model][kv_cache][flash][numerics]") {
  torch::manual_seed(45);
  Transformer reference(testing::small_text_model(AttentionKind::kReference, 2));
  Transformer flash(testing::small_text_model(AttentionKind::kFlash, 2));
  copy_weights(reference, flash);
  reference->eval();
  flash->eval();
  torch::NoGradGuard no_grad;
  const int64_t time = 9;
  const auto tokens = torch::randint(0, 11, {2, time}, torch::kLong);
  // Row 0: documents [0..3] and [4..8] packed, positions restart at 4. Row 1: two left-padding tokens.
  const auto segments =
      torch::tensor({0L, 0L, 0L, 0L, 1L, 1L, 1L, 1L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L}).view({2, time});
  const auto positions =
      torch::tensor({0L, 1L, 2L, 3L, 0L, 1L, 2L, 3L, 4L, 0L, 0L, 0L, 1L, 2L, 3L, 4L, 5L, 6L}).view({2, time});
  auto valid = torch::ones({2, time}, torch::kBool);
  valid[1][0] = false;
  valid[1][1] = false;
  const auto full = flash->forward({tokens, positions, segments, valid}).logits;
  const auto bound = testing::logits_bound(flash->config(), full, time, 7);
  CATCH_CHECK(
      within(full, reference->forward({tokens, positions, segments, valid}).logits, bound, "reference"));

  for (const int64_t max_len : {0, 12}) {
    for (const std::vector<int64_t>& sizes :
         std::vector<std::vector<int64_t>>{{1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 1, 4, 1}, {5, 4}, {9}}) {
      CATCH_INFO("max_len " << max_len << ", " << sizes.size() << " chunks");
      KVCache cache(2, 2, max_len);
      std::vector<torch::Tensor> parts;
      int64_t start = 0;
      for (const int64_t n : sizes) {
        const ModelInputs in{tokens.narrow(1, start, n), positions.narrow(1, start, n),
                             segments.narrow(1, start, n), valid.narrow(1, start, n)};
        parts.push_back(flash->forward(in, &cache).logits);
        start += n;
      }
      CATCH_CHECK(within(torch::cat(parts, 1), full, bound, "cached"));
    }
  }
}
