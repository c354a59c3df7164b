// The q/k row permutation between RoPE pairings: an exact inverse pair, and a halves model with permuted
// rows computes what the same model does with interleaved pairing (the claim GGUF and HF export rest on).
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "interop/qk_layout.h"
#include "model/transformer.h"
#include "support/small_model.h"

using namespace causal;

CATCH_TEST_CASE("qk layout: halves_to_interleaved moves row i+dk/2 next to row i and inverts exactly",
                "[unit][interop]") {
  const int64_t heads = 3, dk = 8, d = 5;
  const torch::Tensor w = torch::arange(heads * dk * d, torch::kFloat).reshape({heads * dk, d});
  const torch::Tensor p = halves_to_interleaved(w, heads);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < dk / 2; ++i) {
      CATCH_CHECK(torch::equal(p[h * dk + 2 * i], w[h * dk + i]));
      CATCH_CHECK(torch::equal(p[h * dk + 2 * i + 1], w[h * dk + dk / 2 + i]));
    }
  CATCH_CHECK(torch::equal(interleaved_to_halves(p, heads), w));
  CATCH_CHECK(torch::equal(halves_to_interleaved(interleaved_to_halves(w, heads), heads), w));
  const torch::Tensor bias = torch::arange(heads * dk, torch::kFloat);
  CATCH_CHECK(torch::equal(interleaved_to_halves(halves_to_interleaved(bias, heads), heads), bias));
}

CATCH_TEST_CASE("qk layout: a halves model equals the interleaved model with permuted q/k rows (GQA)",
                "[unit][interop]") {
  ModelConfig m = testing::small_llama_model(50);
  m.rope.original_max_seq_len = 16;
  m.rope.pairing = RopePairing::kHalves;
  torch::manual_seed(3);
  Transformer halves(m);
  m.rope.pairing = RopePairing::kInterleaved;
  Transformer interleaved(m);
  Transformer unpermuted(m);
  {
    torch::NoGradGuard no_grad;
    auto source = halves->named_parameters();
    for (auto& item : interleaved->named_parameters()) {
      torch::Tensor w = source[item.key()];
      if (item.key().find("q_proj") != std::string::npos) w = halves_to_interleaved(w, m.n_heads);
      if (item.key().find("k_proj") != std::string::npos) w = halves_to_interleaved(w, m.n_kv_heads);
      item.value().copy_(w);
    }
    for (auto& item : unpermuted->named_parameters()) item.value().copy_(source[item.key()]);
  }
  halves->eval();
  interleaved->eval();
  unpermuted->eval();
  const torch::Tensor tokens = torch::randint(0, 50, {2, 16}, torch::kLong);
  const torch::Tensor a = halves->forward({tokens}).logits;
  const torch::Tensor b = interleaved->forward({tokens}).logits;
  const torch::Tensor c = unpermuted->forward({tokens}).logits;
  CATCH_CHECK((a - b).abs().max().item<double>() < 1e-5);
  // Negative control: without the permutation the model is another one.
  CATCH_CHECK((a - c).abs().max().item<double>() > 1e-2);
}
