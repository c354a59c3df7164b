// Transformer: parameter names and counts, causality, GQA, KV cache, masking, ablation, init, tying, dropout.
#include <torch/torch.h>
// Torch first: its glog macros must not replace Catch's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/attention.h"
#include "model/count_parameters.h"
#include "model/feed_forward.h"
#include "model/kv_cache.h"
#include "model/mask.h"
#include "model/transformer.h"
#include "review/attention_observers.h"
#include "support/tolerance.h"

using namespace causal;

namespace {

// A resolved two-field config (the retrieval task's shape); tests change what they exercise.
ModelConfig tiny_config(PositionKind position = PositionKind::kRope,
                        AttentionKind kernel = AttentionKind::kReference) {
  ModelConfig c;
  c.inputs = {InputField{"key", 8}, InputField{"value", 9}};
  c.output_vocab = 8;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.ffn_hidden = 64;
  c.position = position;
  c.max_seq_len = 32;
  c.attention = kernel;
  c.attention_block = 3;  // several key blocks (one not full) for "flash" at these lengths
  c.init_std = 0.1;       // larger than the default so that perturbation effects are far above rounding
  return c;
}

// Random (B,T,F) ids valid for every field of `c`.
torch::Tensor random_tokens(const ModelConfig& c, int64_t batch, int64_t time) {
  std::vector<torch::Tensor> fields;
  for (const InputField& f : c.inputs)
    fields.push_back(torch::randint(0, f.vocab, {batch, time}, torch::kLong));
  return torch::stack(fields, -1);  // (B,T,F)
}

std::vector<std::string> parameter_names(const torch::nn::Module& m) { return m.named_parameters().keys(); }

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

using testing::logits_bound;
using testing::within;

// Every value seen at the watched hook points, in order.
struct Recorder : ForwardObserver {
  explicit Recorder(std::vector<HookPoint> watched) : points(std::move(watched)) {}
  std::vector<HookPoint> points;
  std::vector<std::pair<HookSite, torch::Tensor>> seen;
  bool watches(HookPoint point) const override {
    return std::find(points.begin(), points.end(), point) != points.end();
  }
  at::Tensor observe(const HookSite& site, const at::Tensor& value) override {
    seen.emplace_back(site, value);
    return value;
  }
};

const char* name_of(PositionKind p) {
  return p == PositionKind::kRope ? "rope" : p == PositionKind::kLearned ? "learned" : "none";
}
const char* name_of(AttentionKind k) {
  return k == AttentionKind::kReference ? "reference" : k == AttentionKind::kSdpa ? "sdpa" : "flash";
}

}  // namespace

// Invariant: checkpoint tensor names (and their order) never change silently.
CATCH_TEST_CASE("model: stable parameter names", "[contract][model]") {
  ModelConfig c = tiny_config(PositionKind::kLearned);
  c.qk_norm = true;
  const std::vector<std::string> expected = {"embed.key.weight",
                                             "embed.value.weight",
                                             "pos_embed.weight",
                                             "blocks.0.attn_norm.weight",
                                             "blocks.0.attn_norm.bias",
                                             "blocks.0.attn.q_proj.weight",
                                             "blocks.0.attn.q_proj.bias",
                                             "blocks.0.attn.k_proj.weight",
                                             "blocks.0.attn.k_proj.bias",
                                             "blocks.0.attn.v_proj.weight",
                                             "blocks.0.attn.v_proj.bias",
                                             "blocks.0.attn.q_norm.weight",
                                             "blocks.0.attn.k_norm.weight",
                                             "blocks.0.attn.o_proj.weight",
                                             "blocks.0.attn.o_proj.bias",
                                             "blocks.0.ffn_norm.weight",
                                             "blocks.0.ffn_norm.bias",
                                             "blocks.0.ffn.fc_in.weight",
                                             "blocks.0.ffn.fc_in.bias",
                                             "blocks.0.ffn.fc_out.weight",
                                             "blocks.0.ffn.fc_out.bias",
                                             "blocks.1.attn_norm.weight",
                                             "blocks.1.attn_norm.bias",
                                             "blocks.1.attn.q_proj.weight",
                                             "blocks.1.attn.q_proj.bias",
                                             "blocks.1.attn.k_proj.weight",
                                             "blocks.1.attn.k_proj.bias",
                                             "blocks.1.attn.v_proj.weight",
                                             "blocks.1.attn.v_proj.bias",
                                             "blocks.1.attn.q_norm.weight",
                                             "blocks.1.attn.k_norm.weight",
                                             "blocks.1.attn.o_proj.weight",
                                             "blocks.1.attn.o_proj.bias",
                                             "blocks.1.ffn_norm.weight",
                                             "blocks.1.ffn_norm.bias",
                                             "blocks.1.ffn.fc_in.weight",
                                             "blocks.1.ffn.fc_in.bias",
                                             "blocks.1.ffn.fc_out.weight",
                                             "blocks.1.ffn.fc_out.bias",
                                             "final_norm.weight",
                                             "final_norm.bias",
                                             "head.weight",
                                             "head.bias"};
  CATCH_CHECK(parameter_names(*Transformer(c)) == expected);

  // SwiGLU + RMSNorm, no biases, tied head, one field, RoPE (no position table).
  ModelConfig s = tiny_config(PositionKind::kRope);
  s.inputs = {InputField{"token", 8}};
  s.n_layers = 1;
  s.ffn = FfnKind::kSwiglu;
  s.norm = NormKind::kRmsNorm;
  s.bias = false;
  s.tie_embeddings = true;
  const std::vector<std::string> expected_swiglu = {"embed.token.weight",
                                                    "blocks.0.attn_norm.weight",
                                                    "blocks.0.attn.q_proj.weight",
                                                    "blocks.0.attn.k_proj.weight",
                                                    "blocks.0.attn.v_proj.weight",
                                                    "blocks.0.attn.o_proj.weight",
                                                    "blocks.0.ffn_norm.weight",
                                                    "blocks.0.ffn.gate_proj.weight",
                                                    "blocks.0.ffn.up_proj.weight",
                                                    "blocks.0.ffn.down_proj.weight",
                                                    "final_norm.weight"};
  CATCH_CHECK(parameter_names(*Transformer(s)) == expected_swiglu);
}

CATCH_TEST_CASE("model: parameter counts follow the stated formulas", "[unit][model]") {
  const int64_t d = 32;
  ModelConfig c = tiny_config();
  c.d_model = d;
  c.ffn_hidden = 4 * d;
  // GELU block with biases and LayerNorm: 12d^2 weights + q,k,v,o biases 4d + fc_in bias 4d + fc_out bias d
  // + two LayerNorms (weight + bias) 4d = 12d^2 + 13d.
  CATCH_CHECK(count_parameters(*Block(c)) == 12 * d * d + 13 * d);
  c.bias = false;  // only the two LayerNorm weights remain
  CATCH_CHECK(count_parameters(*Block(c)) == 12 * d * d + 2 * d);

  // SwiGLU, hidden = ceil(2/3 * 4d / multiple_of) * multiple_of, RMSNorm (weights only), biases on:
  // attention 4d^2 + 4d, FFN 3*d*h + 2h + d, norms 2d.
  const int64_t d2 = 48, m = 8;
  const int64_t h = static_cast<int64_t>(std::ceil(2.0 / 3.0 * 4.0 * d2 / m)) * m;
  ModelConfig s = tiny_config();
  s.d_model = d2;
  s.ffn = FfnKind::kSwiglu;
  s.ffn_multiple_of = m;
  s.ffn_hidden = h;
  s.norm = NormKind::kRmsNorm;
  CATCH_CHECK(count_parameters(*Block(s)) == 4 * d2 * d2 + 4 * d2 + 3 * d2 * h + 2 * h + d2 + 2 * d2);
  // GQA with Hkv = 2 of 4 heads halves k_proj and v_proj (weights and biases).
  s.n_kv_heads = 2;
  CATCH_CHECK(count_parameters(*Block(s)) ==
              (2 * d2 * d2 + 2 * d2) + (d2 * d2 + d2) + 3 * d2 * h + 2 * h + d2 + 2 * d2);

  // Whole model: embeddings + L blocks + final norm + head (weight and bias).
  ModelConfig full = tiny_config(PositionKind::kLearned);
  Transformer model(full);
  const int64_t dm = full.d_model;
  const int64_t block = count_parameters(*model->blocks()[0]);
  CATCH_CHECK(count_parameters(*model) == (8 + 9) * dm + full.max_seq_len * dm + full.n_layers * block +
                                              2 * dm + dm * full.output_vocab + full.output_vocab);
}

// Invariant: changing inputs at positions >= t leaves logits at positions < t bitwise unchanged (CPU), for
// every kernel and every position kind, while later logits do change.
CATCH_TEST_CASE("model: perturbing future inputs leaves earlier logits bitwise unchanged",
                "[contract][model]") {
  for (const AttentionKind kernel :
       {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash}) {
    for (const PositionKind position : {PositionKind::kRope, PositionKind::kLearned, PositionKind::kNone}) {
      CATCH_INFO("kernel " << name_of(kernel) << ", position " << name_of(position));
      torch::manual_seed(31);
      const ModelConfig c = tiny_config(position, kernel);
      Transformer model(c);
      model->eval();
      torch::NoGradGuard no_grad;
      const int64_t t = 4;
      const auto tokens = random_tokens(c, 2, 10);
      auto perturbed = tokens.clone();
      perturbed.narrow(1, t, 10 - t).select(2, 1).add_(1).remainder_(9);  // change every later value id
      const auto a = model->forward({tokens}).logits;
      const auto b = model->forward({perturbed}).logits;
      CATCH_CHECK(torch::equal(a.narrow(1, 0, t), b.narrow(1, 0, t)));
      CATCH_CHECK(max_abs_diff(a.narrow(1, t, 10 - t), b.narrow(1, t, 10 - t)) > 1e-4);
    }
  }
}

// Invariant: the mask a model keeps for batches of one shape gives exactly what a freshly built mask gives,
// whatever came between (other lengths, key padding), also with one head of one row, where the per-head
// score buffer has the shape of the kept mask itself.
CATCH_TEST_CASE("model: a mask kept for one sequence shape equals a freshly built one", "[contract][model]") {
  for (const AttentionKind kernel : {AttentionKind::kReference, AttentionKind::kSdpa}) {
    for (const int64_t heads : {int64_t{1}, int64_t{4}}) {
      CATCH_INFO("kernel " << name_of(kernel) << ", heads " << heads);
      ModelConfig c = tiny_config(PositionKind::kLearned, kernel);
      c.n_heads = c.n_kv_heads = heads;
      torch::manual_seed(5);
      Transformer kept(c);
      torch::manual_seed(5);
      Transformer fresh_source(c);
      kept->eval();
      torch::NoGradGuard no_grad;
      const auto fresh = [&](const ModelInputs& in) {
        Transformer m(c);  // a new model has nothing kept
        for (size_t i = 0; i < m->parameters().size(); ++i)
          m->parameters()[i].copy_(fresh_source->parameters()[i]);
        m->eval();
        return m->forward(in).logits;
      };
      const int64_t batch = heads == 1 ? 1 : 2;
      const auto six = random_tokens(c, batch, 6);
      const auto four = random_tokens(c, batch, 4);
      ModelInputs padded{six};
      padded.key_valid = torch::ones({batch, 6}, torch::kBool);
      ModelInputs all_valid{six};
      all_valid.key_valid = torch::ones({batch, 6}, torch::kBool);  // masks as unpadded
      padded.key_valid.select(1, 5).fill_(false);
      for (const ModelInputs& in : {ModelInputs{six}, all_valid, ModelInputs{four}, padded, ModelInputs{six}})
        CATCH_CHECK(torch::equal(kept->forward(in).logits, fresh(in)));
      CATCH_CHECK(torch::equal(kept->forward(all_valid).logits, kept->forward({six}).logits));
    }
  }
}

// Invariant: GQA (and MQA) equal MHA whose K/V heads are the GQA heads repeated, query head h -> KV head h/G.
CATCH_TEST_CASE("model: GQA and MQA equal MHA with repeated KV heads", "[contract][model][numerics]") {
  for (const int64_t kv_heads : {2, 1}) {
    for (const AttentionKind kernel :
         {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash}) {
      CATCH_INFO("n_kv_heads " << kv_heads << ", kernel " << name_of(kernel));
      torch::manual_seed(32);
      ModelConfig gc = tiny_config(PositionKind::kRope, kernel);
      gc.n_kv_heads = kv_heads;
      gc.qk_norm = true;
      ModelConfig mc = gc;
      mc.n_kv_heads = gc.n_heads;
      Transformer gqa(gc), mha(mc);
      const int64_t group = gc.n_heads / kv_heads, dk = gc.head_dim();
      CATCH_REQUIRE(count_parameters(*gqa) < count_parameters(*mha));
      {
        torch::NoGradGuard no_grad;
        auto target = mha->named_parameters();
        for (const auto& item : gqa->named_parameters()) {
          torch::Tensor value = item.value();
          const std::string& name = item.key();
          if (name.find("attn.k_proj") != std::string::npos ||
              name.find("attn.v_proj") != std::string::npos) {
            // (Hkv*dk, ...) -> (Hkv, dk, ...) -> repeat each KV head G times -> (Hq*dk, ...)
            std::vector<int64_t> shape = {kv_heads, dk};
            if (value.dim() == 2) shape.push_back(value.size(1));
            value = value.reshape(shape).repeat_interleave(group, 0).flatten(0, 1);
          }
          target[name].copy_(value);
        }
      }
      gqa->eval();
      mha->eval();
      torch::NoGradGuard no_grad;
      const auto tokens = random_tokens(gc, 2, 7);
      const auto g = gqa->forward({tokens}).logits;
      const auto m = mha->forward({tokens}).logits;
      CATCH_CHECK(within(g, m, logits_bound(gc, m, 7, 7), "logits"));
      CATCH_CHECK(g.abs().max().item<double>() > 1e-2);  // not trivially zero
    }
  }
}

// Invariant: token-by-token cached decoding gives the full causal pass's logits (RoPE at absolute positions).
CATCH_TEST_CASE("model: KV cache token by token equals the full pass",
                "[contract][model][kv_cache][numerics]") {
  for (const AttentionKind kernel :
       {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash}) {
    for (const PositionKind position : {PositionKind::kRope, PositionKind::kLearned}) {
      for (const int64_t max_len : {0, 16}) {
        CATCH_INFO("kernel " << name_of(kernel) << ", position " << name_of(position) << ", max_len "
                             << max_len);
        torch::manual_seed(33);
        ModelConfig c = tiny_config(position, kernel);
        c.n_kv_heads = 2;
        Transformer model(c);
        model->eval();
        torch::NoGradGuard no_grad;
        const int64_t time = 9;
        const auto tokens = random_tokens(c, 2, time);
        const auto full = model->forward({tokens}).logits;  // (B,T,V)
        const auto bound = logits_bound(c, full, time, time);

        KVCache cache(c.n_layers, 2, max_len);
        std::vector<torch::Tensor> steps;
        for (int64_t t = 0; t < time; ++t) {
          steps.push_back(model->forward({tokens.narrow(1, t, 1)}, &cache).logits);
          CATCH_REQUIRE(cache.length() == t + 1);
        }
        CATCH_CHECK(within(torch::cat(steps, 1), full, bound, "token by token"));
        CATCH_CHECK(cache.bytes() > 0);

        // Not vacuous: decoding with every position pinned to 0 (the classic cache bug) differs.
        KVCache wrong(c.n_layers, 2, max_len);
        std::vector<torch::Tensor> wrong_steps;
        for (int64_t t = 0; t < time; ++t) {
          ModelInputs in{tokens.narrow(1, t, 1), torch::zeros({2, 1}, torch::kLong)};
          wrong_steps.push_back(model->forward(in, &wrong).logits);
        }
        CATCH_CHECK(max_abs_diff(torch::cat(wrong_steps, 1), full) > 1e-4);

        cache.reset();
        CATCH_CHECK(cache.length() == 0);
        CATCH_CHECK(within(model->forward({tokens.narrow(1, 0, 1)}, &cache).logits, full.narrow(1, 0, 1),
                           bound.narrow(1, 0, 1), "after reset"));
      }
    }
  }
}

// Invariant: decoding in multi-token chunks (rectangular masks) equals the full pass, also with left padding,
// packed segments and per-document positions carried by the cache.
CATCH_TEST_CASE("model: multi-token cached chunks equal the full pass",
                "[contract][model][kv_cache][numerics]") {
  for (const AttentionKind kernel :
       {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash}) {
    for (const int64_t max_len : {0, 12}) {
      CATCH_INFO("kernel " << name_of(kernel) << ", max_len " << max_len);
      torch::manual_seed(34);
      const ModelConfig c = tiny_config(PositionKind::kRope, kernel);
      Transformer model(c);
      model->eval();
      torch::NoGradGuard no_grad;
      const int64_t time = 9;
      const auto tokens = random_tokens(c, 2, time);
      // Row 0: documents [0..3] and [4..8] packed, positions restart at 4. Row 1: two left-padding tokens.
      const auto segments =
          torch::tensor({0L, 0L, 0L, 0L, 1L, 1L, 1L, 1L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L})
              .view({2, time});
      const auto positions =
          torch::tensor({0L, 1L, 2L, 3L, 0L, 1L, 2L, 3L, 4L, 0L, 0L, 0L, 1L, 2L, 3L, 4L, 5L, 6L})
              .view({2, time});
      auto valid = torch::ones({2, time}, torch::kBool);
      valid[1][0] = false;
      valid[1][1] = false;
      const ModelInputs all{tokens, positions, segments, valid};
      const auto full = model->forward(all).logits;
      CATCH_REQUIRE(torch::isfinite(full).all().item<bool>());
      const auto bound = logits_bound(c, full, time, 5);

      const auto check_chunks = [&](const std::vector<int64_t>& sizes) {
        KVCache cache(c.n_layers, 2, max_len);
        std::vector<torch::Tensor> parts;
        int64_t start = 0;
        for (const int64_t n : sizes) {
          const ModelInputs in{tokens.narrow(1, start, n), positions.narrow(1, start, n),
                               segments.narrow(1, start, n), valid.narrow(1, start, n)};
          parts.push_back(model->forward(in, &cache).logits);
          start += n;
        }
        return within(torch::cat(parts, 1), full, bound, std::to_string(sizes.size()) + " chunks");
      };
      CATCH_CHECK(check_chunks({3, 1, 4, 1}));
      CATCH_CHECK(check_chunks({5, 4}));
      CATCH_CHECK(check_chunks({9}));

      // Not vacuous: the segment isolation matters (without it document 1 would read document 0).
      const auto unsegmented = model->forward({tokens, positions, {}, valid}).logits;
      CATCH_CHECK(max_abs_diff(unsegmented.narrow(1, 4, 5)[0], full.narrow(1, 4, 5)[0]) > 1e-4);
    }
  }
}

// Invariant: a query with no allowed key (a padding query whose keys are all padding) gets exactly zero
// attention output, and logits and gradients stay finite.
CATCH_TEST_CASE("model: fully masked rows give zero attention output and finite logits",
                "[contract][model]") {
  torch::manual_seed(35);
  const int64_t time = 5;
  auto valid = torch::ones({2, time}, torch::kBool);
  valid[1][0] = false;  // row 1 starts with one padding token: its query 0 has no allowed key
  const AttentionMask mask(MaskParts{torch::arange(time), torch::arange(time), valid, {}, {}});
  CATCH_REQUIRE_FALSE(mask.allowed()[1][0][0].any().item<bool>());

  for (const AttentionKind kernel :
       {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash}) {
    CATCH_INFO("kernel " << name_of(kernel));
    // Attention module without biases: zero attention output means o_proj's output is exactly zero.
    Attention attn(AttentionOptions(32, 4, 2).bias(false).kernel(kernel).init_std(0.1).out_init_std(0.1));
    AttentionContext context;
    context.mask = mask;
    const auto x = torch::randn({2, time, 32});
    const auto out = attn->forward(x, context);  // (B,T,D)
    CATCH_CHECK(torch::equal(out[1][0], torch::zeros({32})));
    CATCH_CHECK(out[1][1].abs().sum().item<float>() > 0);
    CATCH_CHECK(torch::isfinite(out).all().item<bool>());

    Transformer model(tiny_config(PositionKind::kRope, kernel));
    const auto tokens = random_tokens(model->config(), 2, time);
    Recorder weights({HookPoint::kAttentionWeights});
    std::optional<ForwardHooks::Registration> watching;
    if (kernel == AttentionKind::kReference) watching.emplace(model->hooks(), weights);
    const auto result = model->forward({tokens, {}, {}, valid});
    CATCH_CHECK(torch::isfinite(result.logits).all().item<bool>());
    for (const auto& [site, w] : weights.seen)
      CATCH_CHECK(torch::equal(w[1].select(1, 0), torch::zeros({4, time})));
    result.logits.sum().backward();
    for (const auto& p : model->parameters()) {
      CATCH_REQUIRE(p.grad().defined());
      CATCH_CHECK(torch::isfinite(p.grad()).all().item<bool>());
    }
  }
}

CATCH_TEST_CASE("model: head ablation removes exactly one head's contribution", "[unit][model][numerics]") {
  torch::manual_seed(36);
  const ModelConfig c = tiny_config();
  Transformer model(c);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto tokens = random_tokens(c, 2, 6);
  const auto base = model->forward({tokens}).logits;
  HeadAblation ablation(/*layer=*/1, /*head=*/2);
  torch::Tensor ablated;
  {
    const ForwardHooks::Registration ablating(model->hooks(), ablation);
    ablated = model->forward({tokens}).logits;
  }
  CATCH_CHECK(max_abs_diff(base, ablated) > 1e-4);

  // Independent check: zeroing the o_proj input columns of head 2 in layer 1 does the same.
  const int64_t dk = c.head_dim();
  model->named_parameters()["blocks.1.attn.o_proj.weight"].narrow(1, 2 * dk, dk).zero_();
  CATCH_CHECK(within(model->forward({tokens}).logits, ablated, logits_bound(c, ablated, 6, 6), "logits"));
}

// Invariant: observers see every hook point in forward order with the documented shapes, an observer of
// attention weights gets them from the reference kernel whatever the model's kernel, and a forward with
// observers that only watch computes the same logits, bit for bit, as one without.
CATCH_TEST_CASE("model: hook points come in forward order with the documented shapes",
                "[unit][model][numerics]") {
  torch::manual_seed(37);
  const ModelConfig c = tiny_config(PositionKind::kRope, AttentionKind::kSdpa);
  Transformer model(c);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto tokens = random_tokens(c, 2, 6);
  const auto plain = model->forward({tokens}).logits;
  Recorder everything({HookPoint::kEmbed, HookPoint::kHeads, HookPoint::kAttentionWeights,
                       HookPoint::kAttention, HookPoint::kFeedForward, HookPoint::kBlock,
                       HookPoint::kFinalNorm, HookPoint::kLogits});
  torch::Tensor watched;
  {
    const ForwardHooks::Registration watching(model->hooks(), everything);
    watched = model->forward({tokens}).logits;
  }
  std::vector<std::string> names;
  for (const auto& [site, value] : everything.seen) names.push_back(site.name());
  const std::vector<std::string> expected = {"embed",
                                             "blocks.0.attn_weights",
                                             "blocks.0.heads",
                                             "blocks.0.attn",
                                             "blocks.0.ffn",
                                             "blocks.0",
                                             "blocks.1.attn_weights",
                                             "blocks.1.heads",
                                             "blocks.1.attn",
                                             "blocks.1.ffn",
                                             "blocks.1",
                                             "final_norm",
                                             "logits"};
  CATCH_CHECK(names == expected);
  const std::vector<std::vector<int64_t>> shapes = {{2, 6, c.d_model},
                                                    {2, c.n_heads, 6, 6},
                                                    {2, c.n_heads, 6, c.head_dim()},
                                                    {2, 6, c.d_model},
                                                    {2, 6, c.d_model},
                                                    {2, 6, c.d_model},
                                                    {2, c.n_heads, 6, 6},
                                                    {2, c.n_heads, 6, c.head_dim()},
                                                    {2, 6, c.d_model},
                                                    {2, 6, c.d_model},
                                                    {2, 6, c.d_model},
                                                    {2, 6, c.d_model},
                                                    {2, 6, c.output_vocab}};
  for (size_t i = 0; i < shapes.size() && i < everything.seen.size(); ++i)
    CATCH_CHECK(everything.seen[i].second.sizes() == torch::IntArrayRef(shapes[i]));
  // Watching weights ran the reference instead of sdpa: equal within the kernels' tolerance.
  CATCH_CHECK(within(watched, plain, logits_bound(c, plain, 6, 6), "logits"));
  // Observers that skip the weights leave sdpa in place: the same bits.
  Recorder streams({HookPoint::kEmbed, HookPoint::kAttention, HookPoint::kFeedForward, HookPoint::kBlock,
                    HookPoint::kFinalNorm, HookPoint::kLogits});
  const ForwardHooks::Registration watching(model->hooks(), streams);
  CATCH_CHECK(torch::equal(model->forward({tokens}).logits, plain));
  CATCH_CHECK(streams.seen.size() == static_cast<size_t>(1 + 3 * c.n_layers + 2));
}

// Invariant: a sliding window of w keys (model.attention_window) gives, on every kernel, the reference's
// logits, and cached decoding in chunks equals the full pass; a window of at least T changes nothing, a
// narrower one does.
CATCH_TEST_CASE("model: a sliding attention window, every kernel, cached and not",
                "[contract][model][kv_cache][numerics]") {
  const int64_t time = 10;
  torch::manual_seed(39);
  ModelConfig base = tiny_config(PositionKind::kRope, AttentionKind::kReference);
  const auto tokens = random_tokens(base, 2, time);
  auto valid = torch::ones({2, time}, torch::kBool);
  valid[1][0] = false;  // a padding query with no key, inside the window or not
  const ModelInputs inputs{tokens, {}, {}, valid};
  torch::NoGradGuard no_grad;
  const auto model_with = [&](AttentionKind kernel, int64_t window) {
    torch::manual_seed(40);  // the same weights for every kernel and window
    ModelConfig c = base;
    c.attention = kernel;
    c.attention_window = window;
    Transformer model(c);
    model->eval();
    return model;
  };
  Transformer reference = model_with(AttentionKind::kReference, 3);
  const auto full = reference->forward(inputs).logits;
  const auto bound = logits_bound(base, full, time, 3);
  CATCH_CHECK(max_abs_diff(full, model_with(AttentionKind::kReference, 0)->forward(inputs).logits) > 1e-4);
  CATCH_CHECK(torch::equal(model_with(AttentionKind::kReference, time)->forward(inputs).logits,
                           model_with(AttentionKind::kReference, 0)->forward(inputs).logits));
  for (const AttentionKind kernel : {AttentionKind::kReference, AttentionKind::kSdpa, AttentionKind::kFlash,
                                     AttentionKind::kQueryBlocks}) {
    CATCH_INFO("kernel " << to_string(kernel));
    Transformer model = model_with(kernel, 3);
    CATCH_CHECK(within(model->forward(inputs).logits, full, bound, "full pass"));
    KVCache cache(base.n_layers, 2, 0);
    std::vector<torch::Tensor> parts;
    int64_t start = 0;
    for (const int64_t n : {4, 1, 3, 2}) {
      parts.push_back(
          model->forward({tokens.narrow(1, start, n), {}, {}, valid.narrow(1, start, n)}, &cache).logits);
      start += n;
    }
    CATCH_CHECK(within(torch::cat(parts, 1), full, bound, "cached chunks"));
  }
}

// Invariant: with RoPE as the only position signal, a common shift of the positions leaves logits unchanged,
// while positions are really used (an uneven shift changes them; learned positions see any shift).
CATCH_TEST_CASE("model: positions passed in are used and RoPE logits ignore a common shift",
                "[contract][model][rope][numerics]") {
  torch::manual_seed(38);
  for (const RopePairing pairing : {RopePairing::kInterleaved, RopePairing::kHalves}) {
    ModelConfig c = tiny_config(PositionKind::kRope);
    c.rope.pairing = pairing;
    c.rope.theta = 100.0;
    Transformer model(c);
    model->eval();
    torch::NoGradGuard no_grad;
    const auto tokens = random_tokens(c, 2, 8);
    const auto base = torch::arange(8).view({1, 8}).expand({2, 8});
    const auto a = model->forward({tokens, base}).logits;
    CATCH_CHECK(max_abs_diff(model->forward({tokens}).logits, a) == 0.0);  // default = arange
    CATCH_CHECK(
        within(model->forward({tokens, base + 13}).logits, a, logits_bound(c, a, 8, 8 + 13), "shifted"));
    const auto uneven = base + torch::tensor({0L, 0L, 0L, 0L, 3L, 3L, 3L, 3L}).view({1, 8});
    CATCH_CHECK(max_abs_diff(model->forward({tokens, uneven}).logits, a) > 1e-4);
  }
  Transformer learned(tiny_config(PositionKind::kLearned));
  learned->eval();
  torch::NoGradGuard no_grad;
  const auto tokens = random_tokens(learned->config(), 2, 8);
  const auto base = torch::arange(8).view({1, 8}).expand({2, 8});
  CATCH_CHECK(max_abs_diff(learned->forward({tokens, base + 3}).logits, learned->forward({tokens}).logits) >
              1e-4);
}

CATCH_TEST_CASE("model: init is deterministic under manual_seed and follows init_std", "[unit][model]") {
  ModelConfig c = tiny_config();
  c.d_model = 256;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.ffn_hidden = 1024;
  c.n_layers = 8;
  c.init_std = 0.02;
  torch::manual_seed(1);
  Transformer a(c);
  torch::manual_seed(1);
  Transformer b(c);
  torch::manual_seed(2);
  Transformer other(c);
  const auto pa = a->named_parameters(), pb = b->named_parameters(), po = other->named_parameters();
  for (const auto& item : pa) CATCH_CHECK(torch::equal(item.value(), pb[item.key()]));
  CATCH_CHECK_FALSE(torch::equal(pa["blocks.0.attn.q_proj.weight"], po["blocks.0.attn.q_proj.weight"]));

  const double out_std = 0.02 / std::sqrt(2.0 * 8);
  const auto std_of = [&](const std::string& name) { return pa[name].std().item<double>(); };
  CATCH_CHECK(std_of("blocks.3.attn.q_proj.weight") == Approx(0.02).epsilon(0.05));
  CATCH_CHECK(std_of("blocks.3.ffn.fc_in.weight") == Approx(0.02).epsilon(0.05));
  CATCH_CHECK(std_of("embed.key.weight") == Approx(0.02).epsilon(0.5));  // 8 x 256 draws
  CATCH_CHECK(std_of("head.weight") == Approx(0.02).epsilon(0.2));
  CATCH_CHECK(std_of("blocks.3.attn.o_proj.weight") == Approx(out_std).epsilon(0.05));
  CATCH_CHECK(std_of("blocks.3.ffn.fc_out.weight") == Approx(out_std).epsilon(0.05));
  CATCH_CHECK(torch::equal(pa["blocks.3.attn.q_proj.bias"], torch::zeros({256})));
  CATCH_CHECK(torch::equal(pa["blocks.3.ffn.fc_out.bias"], torch::zeros({256})));
  CATCH_CHECK(torch::equal(pa["blocks.3.attn_norm.weight"], torch::ones({256})));
  CATCH_CHECK(torch::equal(pa["final_norm.bias"], torch::zeros({256})));
}

CATCH_TEST_CASE("model: tied embeddings reuse the input table as the head", "[unit][model]") {
  torch::manual_seed(39);
  ModelConfig c = tiny_config();
  c.inputs = {InputField{"token", 8}};
  c.tie_embeddings = true;
  Transformer tied(c);
  c.tie_embeddings = false;
  Transformer untied(c);
  CATCH_CHECK(count_parameters(*untied) - count_parameters(*tied) == c.d_model * 8 + 8);
  // Ids 0..3 only: the embedding rows 4..7 get gradient only through the tied head.
  const auto tokens = torch::randint(0, 4, {2, 5}, torch::kLong);
  tied->forward({tokens}).logits.sum().backward();
  const auto grad = tied->named_parameters()["embed.token.weight"].grad();
  CATCH_REQUIRE(grad.defined());
  CATCH_CHECK(grad.narrow(0, 4, 4).abs().sum().item<float>() > 0);

  ModelConfig bad = c;
  bad.tie_embeddings = true;
  bad.output_vocab = 9;
  CATCH_CHECK_THROWS_AS(Transformer(bad), c10::Error);
}

CATCH_TEST_CASE("model: dropout acts only in train mode", "[unit][model]") {
  torch::manual_seed(40);
  for (const AttentionKind kernel : {AttentionKind::kReference, AttentionKind::kSdpa}) {
    ModelConfig c = tiny_config(PositionKind::kRope, kernel);
    c.dropout = 0.3;
    Transformer model(c);
    torch::NoGradGuard no_grad;
    const auto tokens = random_tokens(c, 2, 6);
    model->eval();
    CATCH_CHECK(torch::equal(model->forward({tokens}).logits, model->forward({tokens}).logits));
    model->train();
    CATCH_CHECK(max_abs_diff(model->forward({tokens}).logits, model->forward({tokens}).logits) > 1e-6);
  }
}

CATCH_TEST_CASE("model: malformed inputs are rejected with a message", "[unit][model]") {
  const ModelConfig c = tiny_config();
  Transformer model(c);
  torch::NoGradGuard no_grad;
  const auto tokens = random_tokens(c, 2, 4);
  CATCH_CHECK_THROWS_AS(model->forward({tokens.select(2, 0)}), c10::Error);      // F missing
  CATCH_CHECK_THROWS_AS(model->forward({tokens.to(torch::kInt)}), c10::Error);   // dtype
  CATCH_CHECK_THROWS_AS(model->forward({random_tokens(c, 1, 40)}), c10::Error);  // > max_seq_len
  CATCH_CHECK_THROWS_AS(model->forward({tokens, torch::zeros({2, 3}, torch::kLong)}),
                        c10::Error);  // positions
  KVCache small(c.n_layers, 3);
  CATCH_CHECK_THROWS_AS(model->forward({tokens}, {&small}), c10::Error);  // batch mismatch
  CATCH_CHECK(small.length() == 0);
  ModelConfig unresolved = c;
  unresolved.n_kv_heads = 0;
  CATCH_CHECK_THROWS_AS(Transformer(unresolved), c10::Error);
}

CATCH_TEST_CASE("model: every ffn/norm/bias/qk_norm variant runs forward and backward", "[unit][model]") {
  torch::manual_seed(41);
  for (const FfnKind ffn : {FfnKind::kGelu, FfnKind::kGeluTanh, FfnKind::kSwiglu}) {
    for (const NormKind norm : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
      for (const bool bias : {true, false}) {
        for (const bool qk_norm : {false, true}) {
          CATCH_INFO("ffn " << static_cast<int>(ffn) << " norm " << static_cast<int>(norm) << " bias " << bias
                            << " qk_norm " << qk_norm);
          ModelConfig c = tiny_config();
          c.ffn = ffn;
          c.norm = norm;
          c.bias = bias;
          c.qk_norm = qk_norm;
          c.n_kv_heads = 2;
          Transformer model(c);
          const auto logits = model->forward({random_tokens(c, 2, 5)}).logits;
          CATCH_CHECK(logits.sizes() == torch::IntArrayRef({2, 5, c.output_vocab}));
          logits.pow(2).sum().backward();
          for (const auto& p : model->named_parameters()) {
            CATCH_INFO(p.key());
            CATCH_REQUIRE(p.value().grad().defined());
            CATCH_CHECK(torch::isfinite(p.value().grad()).all().item<bool>());
          }
        }
      }
    }
  }
}

// The lab's nn.TransformerEncoderLayer uses a ReLU FFN: "relu" is fc_out(relu(fc_in(x))) under the GELU
// FFN's parameter names, checked against the formula written out here.
CATCH_TEST_CASE("model: relu ffn computes fc_out(relu(fc_in(x)))", "[unit][model][numerics]") {
  torch::manual_seed(31);
  FeedForward relu(FeedForwardOptions(6, 10).kind(FfnKind::kRelu));
  FeedForward gelu(FeedForwardOptions(6, 10).kind(FfnKind::kGelu));
  const auto params = relu->named_parameters();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : gelu->named_parameters()) p.value().copy_(params[p.key()]);
  }
  CATCH_REQUIRE(params.size() == 4);
  CATCH_CHECK(params.contains("fc_in.weight"));
  const auto x = torch::randn({3, 6});
  const auto hidden = x.matmul(params["fc_in.weight"].t()) + params["fc_in.bias"];
  const auto expected = hidden.clamp_min(0).matmul(params["fc_out.weight"].t()) + params["fc_out.bias"];
  torch::NoGradGuard no_grad;
  // fc_in's difference (tolerance.h (2)) carried through relu (gain <= 1) and |fc_out|, plus fc_out's own.
  const auto w_in = params["fc_in.weight"].t(), w_out = params["fc_out.weight"].t();
  const auto carried =
      torch::matmul(testing::product_bound(x, w_in, params["fc_in.bias"]), w_out.abs().to(torch::kDouble));
  const auto bound = carried + testing::product_bound(hidden.clamp_min(0), w_out, params["fc_out.bias"]);
  CATCH_CHECK(within(relu->forward(x), expected, bound, "relu ffn"));
  CATCH_CHECK(hidden.lt(0).any().item<bool>());  // some units are cut, so relu and gelu differ here
  CATCH_CHECK_FALSE(torch::allclose(relu->forward(x), gelu->forward(x), 1e-3, 1e-3));
}

// "gelu_tanh" is GPT-2's tanh GELU (transformers' gelu_new) under the GELU FFN's parameter names: with fc_in
// and fc_out the identity, the module's output and input gradient are the formula and its derivative, written
// out here in double; and it is not the exact GELU.
CATCH_TEST_CASE("model: gelu_tanh ffn computes 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))",
                "[unit][model][numerics]") {
  FeedForward ffn(FeedForwardOptions(4, 4).kind(FfnKind::kGeluTanh));
  FeedForward exact(FeedForwardOptions(4, 4).kind(FfnKind::kGelu));
  {
    torch::NoGradGuard no_grad;
    for (FeedForward* f : {&ffn, &exact}) {
      for (auto& p : (*f)->named_parameters())
        p.value().copy_(p.key().find("weight") != std::string::npos ? torch::eye(4) : torch::zeros({4}));
    }
  }
  CATCH_CHECK(ffn->named_parameters().keys() == exact->named_parameters().keys());
  const auto x = torch::linspace(-6.0, 6.0, 4 * 61).view({61, 4}).requires_grad_(true);  // (N,D)
  const auto out = ffn->forward(x);
  out.sum().backward();
  const auto h = x.detach().to(torch::kDouble);
  const double c = std::sqrt(2.0 / M_PI);
  const auto t = torch::tanh(c * (h + 0.044715 * h.pow(3)));
  const auto expected = 0.5 * h * (1 + t);
  const auto expected_grad = 0.5 * (1 + t) + 0.5 * h * (1 - t.pow(2)) * c * (1 + 3 * 0.044715 * h.pow(2));
  // float32 rounding of a few pointwise operations, relative to the value; the derivative's 1 - tanh^2
  // cancels near saturation, where float32's tanh (ulp 6e-8) times |x| (1 + 0.134 x^2) <= 30 leaves ~2e-6.
  CATCH_CHECK(within(out.detach(), expected, 1e-6 * (1 + expected.abs()), "gelu_tanh"));
  CATCH_CHECK(within(x.grad(), expected_grad, torch::full_like(expected_grad, 1e-5), "gelu_tanh derivative"));
  // Neither bound admits the exact GELU, whose value differs by up to 4.7e-4.
  const auto x_exact = x.detach().clone().requires_grad_(true);
  const auto out_exact = exact->forward(x_exact);
  out_exact.sum().backward();
  CATCH_CHECK(max_abs_diff(out_exact.detach(), out.detach()) > 1e-4);
  CATCH_CHECK(max_abs_diff(x_exact.grad(), x.grad()) > 1e-4);
}

// Invariant: qkv_bias (Qwen2) gives q_proj, k_proj and v_proj a bias, under the names model.bias gives
// them, and nothing else one; the biases enter the projections as model.bias's do.
CATCH_TEST_CASE("model: qkv_bias gives q, k and v a bias and o_proj none", "[contract][model]") {
  ModelConfig q = tiny_config();
  q.inputs = {InputField{"token", 8}};
  q.n_layers = 1;
  q.n_kv_heads = 2;
  q.ffn = FfnKind::kSwiglu;
  q.norm = NormKind::kRmsNorm;
  q.bias = false;
  q.qkv_bias = true;
  q.tie_embeddings = true;
  const std::vector<std::string> expected = {"embed.token.weight",
                                             "blocks.0.attn_norm.weight",
                                             "blocks.0.attn.q_proj.weight",
                                             "blocks.0.attn.q_proj.bias",
                                             "blocks.0.attn.k_proj.weight",
                                             "blocks.0.attn.k_proj.bias",
                                             "blocks.0.attn.v_proj.weight",
                                             "blocks.0.attn.v_proj.bias",
                                             "blocks.0.attn.o_proj.weight",
                                             "blocks.0.ffn_norm.weight",
                                             "blocks.0.ffn.gate_proj.weight",
                                             "blocks.0.ffn.up_proj.weight",
                                             "blocks.0.ffn.down_proj.weight",
                                             "final_norm.weight"};
  torch::manual_seed(5);
  Transformer with_qkv(q);
  CATCH_REQUIRE(parameter_names(*with_qkv) == expected);
  const auto params = with_qkv->named_parameters();
  CATCH_CHECK(params["blocks.0.attn.q_proj.bias"].sizes() == torch::IntArrayRef({32}));  // Hq dk
  CATCH_CHECK(params["blocks.0.attn.k_proj.bias"].sizes() == torch::IntArrayRef({16}));  // Hkv dk
  ModelConfig none = q;
  none.qkv_bias = false;
  CATCH_CHECK(count_parameters(*with_qkv->blocks()[0]) == count_parameters(*Block(none)) + 32 + 2 * 16);

  // The same weights in a model with every bias, the others zero: the same logits.
  ModelConfig all = none;
  all.bias = true;
  Transformer with_all(all);
  {
    torch::NoGradGuard no_grad;
    for (const char* b : {"q", "k", "v"})
      params[std::string("blocks.0.attn.") + b + "_proj.bias"].normal_(0.0, 0.5);
    for (auto& p : with_all->named_parameters()) {
      if (params.contains(p.key())) {
        p.value().copy_(params[p.key()]);
      } else {
        p.value().zero_();
      }
    }
  }
  torch::NoGradGuard no_grad;
  const auto tokens = random_tokens(q, 2, 7);
  const auto logits = with_qkv->forward({tokens}).logits;
  CATCH_CHECK(torch::allclose(logits, with_all->forward({tokens}).logits, 1e-5, 1e-6));
  for (const char* b : {"q", "k", "v"}) {
    CATCH_INFO(b);
    const auto saved = params[std::string("blocks.0.attn.") + b + "_proj.bias"].clone();
    params[std::string("blocks.0.attn.") + b + "_proj.bias"].zero_();
    CATCH_CHECK(max_abs_diff(with_qkv->forward({tokens}).logits, logits) > 1e-4);  // each bias is used
    params[std::string("blocks.0.attn.") + b + "_proj.bias"].copy_(saved);
  }
}
