// GGUF export and import in memory: a file without causal's provenance (as another tool would write it)
// imports as the interleaved model that computes the same logits; with provenance the original model
// comes back bit for bit; f16/bf16 files hold the weights rounded once, q8_0 files quantized.
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "config/config_io.h"
#include "interop/gguf_export.h"
#include "interop/gguf_import.h"
#include "model/transformer.h"
#include "support/small_model.h"

using namespace causal;

namespace {

ModelConfig halves_llama() {
  ModelConfig m = testing::small_llama_model(259);
  m.rope.original_max_seq_len = 16;
  m.rope.pairing = RopePairing::kHalves;
  return m;
}

InteropModel interop_of(Transformer& model, const ModelConfig& m) {
  InteropModel im;
  im.model = m;
  RunConfig run;
  run.model = m;
  im.config = config_to_json(run);
  for (const auto& item : model->named_parameters()) im.tensors[item.key()] = item.value().detach().clone();
  im.tokenizer = InteropTokenizer{ByteTokenizer().info(), ""};
  return im;
}

torch::Tensor logits_of(const ModelConfig& m, const std::map<std::string, at::Tensor>& tensors,
                        const torch::Tensor& tokens) {
  Transformer model(m);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) item.value().copy_(tensors.at(item.key()));
  model->eval();
  return model->forward({tokens}).logits;
}

}  // namespace

CATCH_TEST_CASE("gguf model: without provenance a halves model imports as interleaved and computes the same",
                "[unit][interop]") {
  const ModelConfig m = halves_llama();
  torch::manual_seed(5);
  Transformer model(m);
  const InteropModel im = interop_of(model, m);
  GgufFile file = gguf_from_model(im, GgufTensorType::kF32, "test");
  const torch::Tensor tokens = torch::randint(0, 259, {2, 16}, torch::kLong);
  const torch::Tensor expected = logits_of(m, im.tensors, tokens);

  // With provenance: the same model section and the same tensors, bit for bit.
  const InteropModel same = model_from_gguf(file, "with.gguf");
  CATCH_CHECK(same.model.rope.pairing == RopePairing::kHalves);
  CATCH_CHECK(same.model.init_std == m.init_std);
  CATCH_REQUIRE(same.tensors.size() == im.tensors.size());
  for (const auto& [name, t] : im.tensors) CATCH_CHECK(torch::equal(same.tensors.at(name), t));
  CATCH_CHECK(same.vocab_pieces.size() == 259);

  // Without: llama.cpp's own convention (interleaved), q/k rows as the file has them.
  file.metadata.erase(std::remove_if(file.metadata.begin(), file.metadata.end(),
                                     [](const auto& kv) { return kv.first == "causal.config"; }),
                      file.metadata.end());
  const InteropModel other = model_from_gguf(file, "without.gguf");
  CATCH_CHECK(other.model.rope.pairing == RopePairing::kInterleaved);
  CATCH_CHECK(!torch::equal(other.tensors.at("blocks.0.attn.q_proj.weight"),
                            im.tensors.at("blocks.0.attn.q_proj.weight")));
  const torch::Tensor got = logits_of(other.model, other.tensors, tokens);
  CATCH_CHECK((got - expected).abs().max().item<double>() < 1e-5);
}

CATCH_TEST_CASE("gguf model: f16 and bf16 files hold each weight rounded once, norms in f32",
                "[unit][interop]") {
  const ModelConfig m = halves_llama();
  torch::manual_seed(6);
  Transformer model(m);
  const InteropModel im = interop_of(model, m);
  for (const auto& [dtype, scalar] :
       {std::pair{GgufTensorType::kF16, torch::kHalf}, std::pair{GgufTensorType::kBf16, torch::kBFloat16}}) {
    const GgufFile file = gguf_from_model(im, dtype, "test");
    CATCH_CHECK(file.tensor("blk.0.attn_norm.weight")->type == GgufTensorType::kF32);
    CATCH_CHECK(file.tensor("blk.0.ffn_up.weight")->type == dtype);
    const InteropModel back = model_from_gguf(file, "rounded.gguf");
    for (const auto& [name, t] : im.tensors) {
      CATCH_INFO(name);
      const torch::Tensor want = t.dim() == 1 ? t : t.to(scalar).to(torch::kFloat);
      CATCH_CHECK(torch::equal(back.tensors.at(name), want));
    }
  }
}

CATCH_TEST_CASE(
    "gguf model: a q8_0 file holds matrices in Q8_0 blocks, partial-block rows in f16, norms in f32",
    "[unit][interop]") {
  ModelConfig m = halves_llama();
  m.ffn_hidden = 48;  // ffn_down's rows are 48 values: not whole 32-element blocks
  torch::manual_seed(7);
  Transformer model(m);
  const InteropModel im = interop_of(model, m);
  const GgufFile file = gguf_from_model(im, GgufTensorType::kQ8_0, "test");
  CATCH_CHECK(std::get<int64_t>(file.find("general.file_type")->value) == 7);  // llama_ftype MOSTLY_Q8_0
  CATCH_CHECK(file.tensor("blk.0.attn_norm.weight")->type == GgufTensorType::kF32);
  CATCH_CHECK(file.tensor("blk.0.ffn_up.weight")->type == GgufTensorType::kQ8_0);
  CATCH_CHECK(file.tensor("token_embd.weight")->type == GgufTensorType::kQ8_0);
  CATCH_CHECK(file.tensor("blk.0.ffn_down.weight")->type == GgufTensorType::kF16);
  const InteropModel back = model_from_gguf(file, "q8.gguf");
  for (const auto& [name, t] : im.tensors) {
    CATCH_INFO(name);
    const torch::Tensor got = back.tensors.at(name);
    if (t.dim() == 1) {
      CATCH_CHECK(torch::equal(got, t));
    } else if (name.find("down_proj") != std::string::npos) {
      CATCH_CHECK(torch::equal(got, t.to(torch::kHalf).to(torch::kFloat)));
    } else {
      // Quantized: each value within half a step (max |x| / 127 of its 32-block, plus the step's own
      // float16 rounding, 127 x 2^-11 of it) of the original, and
      // not all of them equal to it, or nothing was quantized.
      const torch::Tensor blocks = t.reshape({-1, 32});
      const torch::Tensor step = blocks.abs().amax(1, true) / 127;
      const torch::Tensor error = (got.reshape({-1, 32}) - blocks).abs();
      CATCH_CHECK((error <= step * 0.57 + 1e-7).all().item<bool>());
      CATCH_CHECK(!torch::equal(got, t));
    }
  }
}
