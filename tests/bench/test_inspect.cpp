// inspect contracts: counts vs an independent shape list, the FLOP/KV-cache/block figures of
// docs/background.md, exact bytes.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/inspect.h"
#include "config/config_io.h"

using Catch::Matchers::Contains;
using causal::ModelConfig;

namespace {

// A parameter as the model registers it: name and shape.
struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

ModelConfig resolved(ModelConfig m) {
  causal::RunConfig run;
  run.model = m;
  causal::resolve(run);
  return run.model;
}

// The parameter layout written out tensor by tensor (transformer.h's names), independent of inspect's sums.
std::vector<Param> expected_parameters(const ModelConfig& config) {
  const ModelConfig m = resolved(config);
  const int64_t d = m.d_model, dk = m.d_model / m.n_heads, hq = m.n_heads, hkv = m.n_kv_heads,
                h = m.ffn_hidden;
  std::vector<Param> out;
  // q/k/v_proj pass with_bias: they have a bias under qkv_bias too.
  auto linear = [&](const std::string& name, int64_t in, int64_t features, bool with_bias = false) {
    out.push_back({name + ".weight", {features, in}});
    if (m.bias || with_bias) out.push_back({name + ".bias", {features}});
  };
  auto norm = [&](const std::string& name) {
    out.push_back({name + ".weight", {d}});
    if (m.norm == causal::NormKind::kLayerNorm && m.bias) out.push_back({name + ".bias", {d}});
  };
  for (const causal::InputField& f : m.inputs) out.push_back({"embed." + f.name + ".weight", {f.vocab, d}});
  if (m.position == causal::PositionKind::kLearned) out.push_back({"pos_embed.weight", {m.max_seq_len, d}});
  for (int64_t i = 0; i < m.n_layers; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    norm(b + "attn_norm");
    linear(b + "attn.q_proj", d, hq * dk, m.qkv_bias);
    linear(b + "attn.k_proj", d, hkv * dk, m.qkv_bias);
    linear(b + "attn.v_proj", d, hkv * dk, m.qkv_bias);
    if (m.qk_norm) {
      out.push_back({b + "attn.q_norm.weight", {dk}});
      out.push_back({b + "attn.k_norm.weight", {dk}});
    }
    linear(b + "attn.o_proj", hq * dk, d);
    norm(b + "ffn_norm");
    if (m.ffn != causal::FfnKind::kSwiglu) {
      linear(b + "ffn.fc_in", d, h);
      linear(b + "ffn.fc_out", h, d);
    } else {
      linear(b + "ffn.gate_proj", d, h);
      linear(b + "ffn.up_proj", d, h);
      linear(b + "ffn.down_proj", h, d);
    }
  }
  norm("final_norm");
  if (!m.tie_embeddings) linear("head", d, m.output_vocab);
  return out;
}

int64_t sum_with_prefix(const std::vector<Param>& params, const std::string& prefix) {
  int64_t n = 0;
  for (const Param& p : params) {
    if (p.name.compare(0, prefix.size(), prefix) == 0) n += p.numel();
  }
  return n;
}

ModelConfig block_model(int64_t d, bool bias, causal::NormKind norm) {
  ModelConfig m;
  m.d_model = d;
  m.n_heads = 4;
  m.bias = bias;
  m.norm = norm;
  m.ffn = causal::FfnKind::kGelu;
  return m;
}

// The KV-cache example of docs/background.md: 32 layers, 4096 positions, dk 128 (d 4096 over 32 query heads).
ModelConfig kv_cache_example_model(int64_t kv_heads) {
  ModelConfig m;
  m.d_model = 4096;
  m.n_heads = 32;
  m.n_kv_heads = kv_heads;
  m.n_layers = 32;
  m.max_seq_len = 4096;
  return m;
}

}  // namespace

CATCH_TEST_CASE("inspect: KV-cache bytes match the documented budget example", "[unit][inspect]") {
  // 2 * B 1 * L 32 * T 4096 * Hkv 8 * dk 128 * 2 bytes (bf16).
  CATCH_CHECK(causal::kv_cache_bytes(1, 32, 4096, 8, 128, 2) == 536870912);
  CATCH_CHECK(causal::kv_cache_bytes(1, 32, 4096, 32, 128, 2) == 2147483648);

  const causal::InspectReport gqa = causal::inspect_model(kv_cache_example_model(8), 4096, 1, "bf16");
  CATCH_CHECK(gqa.memory.kv_cache == 536870912);
  CATCH_CHECK_THAT(causal::format_inspect(gqa), Contains("536,870,912") && Contains("512.00 MiB"));
  const causal::InspectReport mha = causal::inspect_model(kv_cache_example_model(32), 4096, 1, "bf16");
  CATCH_CHECK(mha.memory.kv_cache == 2147483648);
  CATCH_CHECK_THAT(causal::format_inspect(mha), Contains("2,147,483,648") && Contains("2.00 GiB"));
  // Linear in batch and context; fp32 doubles it.
  CATCH_CHECK(causal::inspect_model(kv_cache_example_model(8), 2048, 3, "fp32").memory.kv_cache ==
              536870912 / 2 * 3 * 2);
}

CATCH_TEST_CASE("inspect: a GELU block without biases, with RMSNorm, has exactly 12d^2 + 2d parameters",
                "[unit][inspect]") {
  for (int64_t d : {32, 64, 96, 4096}) {
    CATCH_INFO("d = " << d);
    const causal::ParameterCounts p =
        causal::parameter_counts(block_model(d, /*bias=*/false, causal::NormKind::kRmsNorm));
    CATCH_CHECK(p.attention_per_block == 4 * d * d);  // q, k, v, o: d x d each
    CATCH_CHECK(p.ffn_per_block == 8 * d * d);        // fc_in d x 4d, fc_out 4d x d
    CATCH_CHECK(p.norms_per_block == 2 * d);          // two RMSNorm weights
    CATCH_CHECK(p.per_block == 12 * d * d + 2 * d);
  }
}

CATCH_TEST_CASE("inspect: a GELU block with biases and LayerNorm has exactly 12d^2 + 13d parameters",
                "[unit][inspect]") {
  for (int64_t d : {32, 64, 96}) {
    CATCH_INFO("d = " << d);
    const causal::ParameterCounts p =
        causal::parameter_counts(block_model(d, /*bias=*/true, causal::NormKind::kLayerNorm));
    CATCH_CHECK(p.attention_per_block == 4 * d * d + 4 * d);  // + q, k, v, o biases (d each)
    CATCH_CHECK(p.ffn_per_block == 8 * d * d + 5 * d);        // + fc_in bias 4d, fc_out bias d
    CATCH_CHECK(p.norms_per_block == 4 * d);                  // two LayerNorms: weight d + bias d
    CATCH_CHECK(p.per_block == 12 * d * d + 13 * d);
  }
}

CATCH_TEST_CASE("inspect: 32 blocks at d=4096 hold ~6.4B parameters, two thirds in the FFN",
                "[unit][inspect]") {
  ModelConfig m = block_model(4096, /*bias=*/false, causal::NormKind::kRmsNorm);
  m.n_heads = 32;
  m.n_layers = 32;
  const causal::ParameterCounts p = causal::parameter_counts(m);
  CATCH_CHECK(p.blocks == 32 * (12 * int64_t{4096} * 4096 + 2 * 4096));
  CATCH_CHECK(p.blocks > 6'400'000'000);
  CATCH_CHECK(p.blocks < 6'500'000'000);
  CATCH_CHECK(3 * p.ffn_per_block == 2 * (p.attention_per_block + p.ffn_per_block));
}

CATCH_TEST_CASE("inspect: parameter counts equal the sum over the model's parameter shapes",
                "[unit][inspect]") {
  std::vector<ModelConfig> configs;
  configs.push_back(ModelConfig{});  // defaults: one 259-token field, rope, layernorm with bias
  {
    ModelConfig m;  // retrieval-style: two summed fields, GQA, swiglu, qk_norm, learned positions, no bias
    m.inputs = {{"key", 8}, {"value", 9}};
    m.output_vocab = 8;
    m.d_model = 48;
    m.n_layers = 3;
    m.n_heads = 6;
    m.n_kv_heads = 2;
    m.ffn = causal::FfnKind::kSwiglu;
    m.qk_norm = true;
    m.position = causal::PositionKind::kLearned;
    m.max_seq_len = 40;
    m.bias = false;
    configs.push_back(m);
  }
  {
    ModelConfig m;  // tied head, RMSNorm with config.bias (RMSNorm still has no bias), explicit ffn width
    m.tie_embeddings = true;
    m.norm = causal::NormKind::kRmsNorm;
    m.ffn_hidden = 100;
    m.n_layers = 1;
    configs.push_back(m);
  }
  {
    ModelConfig m;  // LayerNorm without bias: weight only
    m.bias = false;
    m.ffn = causal::FfnKind::kSwiglu;
    m.ffn_multiple_of = 64;
    configs.push_back(m);
  }
  {
    ModelConfig m;  // Qwen2's layout: q/k/v biases only, GQA; and a tanh GELU model
    m.bias = false;
    m.qkv_bias = true;
    m.n_kv_heads = 2;
    m.norm = causal::NormKind::kRmsNorm;
    m.ffn = causal::FfnKind::kSwiglu;
    configs.push_back(m);
    m.ffn = causal::FfnKind::kGeluTanh;
    configs.push_back(m);
  }
  for (std::size_t i = 0; i < configs.size(); ++i) {
    CATCH_INFO("config " << i);
    const std::vector<Param> params = expected_parameters(configs[i]);
    const causal::ParameterCounts p = causal::parameter_counts(configs[i]);
    CATCH_CHECK(p.total == sum_with_prefix(params, ""));
    CATCH_CHECK(p.embeddings == sum_with_prefix(params, "embed."));
    CATCH_CHECK(p.positions == sum_with_prefix(params, "pos_embed."));
    CATCH_CHECK(p.attention_per_block == sum_with_prefix(params, "blocks.0.attn."));
    CATCH_CHECK(p.norms_per_block == sum_with_prefix(params, "blocks.0.attn_norm.") +
                                         sum_with_prefix(params, "blocks.0.ffn_norm."));
    CATCH_CHECK(p.ffn_per_block == sum_with_prefix(params, "blocks.0.ffn."));
    CATCH_CHECK(p.blocks == sum_with_prefix(params, "blocks."));
    CATCH_CHECK(p.final_norm == sum_with_prefix(params, "final_norm."));
    CATCH_CHECK(p.head == sum_with_prefix(params, "head."));
  }
}

CATCH_TEST_CASE(
    "inspect: FFN work is 16x pairwise attention at n=1024, d=4096 (the documented worked answer)",
    "[unit][inspect]") {
  ModelConfig m = block_model(4096, /*bias=*/false, causal::NormKind::kRmsNorm);
  m.n_heads = 32;
  m.max_seq_len = 1024;
  const causal::FlopsPerToken f = causal::inspect_model(m, 1024).flops;
  // Per token: FFN 16 d^2, pairwise attention 4 n d, projections 8 d^2 (the documented counts divided by n).
  CATCH_CHECK(f.ffn == 16 * int64_t{4096} * 4096);
  CATCH_CHECK(f.attention_scores == 4 * 1024 * 4096);
  CATCH_CHECK(f.attention_projections == 8 * int64_t{4096} * 4096);
  CATCH_CHECK(f.ffn % f.attention_scores == 0);
  CATCH_CHECK(f.ffn / f.attention_scores == 16);
  // At n = 4d the two are equal in this noncausal count.
  m.max_seq_len = 4 * 4096;
  const causal::FlopsPerToken crossover = causal::inspect_model(m, 4 * 4096).flops;
  CATCH_CHECK(crossover.ffn == crossover.attention_scores);
}

CATCH_TEST_CASE("inspect: forward FLOPs are 2 x matmul weights + attention and training is 3 x forward",
                "[unit][inspect]") {
  ModelConfig m;
  m.inputs = {{"token", 10}};
  m.output_vocab = 10;
  m.d_model = 8;
  m.n_heads = 2;
  m.n_layers = 1;
  m.ffn_hidden = 32;
  m.max_seq_len = 4;
  const causal::InspectReport r = causal::inspect_model(m, 4);
  // Matmul weights: q,k,v,o 4 * 8*8 = 256; fc_in + fc_out 2 * 8*32 = 512; head 8*10 = 80 -> 848.
  CATCH_CHECK(r.parameters.matmul == 848);
  CATCH_CHECK(r.flops.attention_scores == 4 * 4 * 8);         // 4 T D = 128
  CATCH_CHECK(r.flops.attention_scores_causal == 2 * 5 * 8);  // mean keys (T+1)/2: 2 (T+1) D = 80
  CATCH_CHECK(r.flops.forward == 2 * 848 + 128);
  CATCH_CHECK(r.flops.forward_causal == 2 * 848 + 80);
  CATCH_CHECK(r.flops.training == 3 * (2 * 848 + 128));
  CATCH_CHECK(r.flops.training_causal == 3 * (2 * 848 + 80));
  CATCH_CHECK(r.flops.forward ==
              r.flops.attention_projections + r.flops.attention_scores + r.flops.ffn + r.flops.head);
  // Embeddings and biases are lookups and adds, not matmuls.
  CATCH_CHECK(r.parameters.matmul < r.parameters.total);
}

CATCH_TEST_CASE("inspect: a tied head adds no parameters but still costs its matmul", "[unit][inspect]") {
  ModelConfig untied;
  ModelConfig tied;
  tied.tie_embeddings = true;
  const causal::InspectReport a = causal::inspect_model(untied);
  const causal::InspectReport b = causal::inspect_model(tied);
  CATCH_CHECK(a.parameters.head == 128 * 259 + 259);
  CATCH_CHECK(b.parameters.head == 0);
  CATCH_CHECK(a.parameters.total - b.parameters.total == 128 * 259 + 259);
  CATCH_CHECK(a.flops.forward == b.flops.forward);
}

CATCH_TEST_CASE("inspect: GQA shrinks only the k/v projections and the KV cache", "[unit][inspect]") {
  ModelConfig mha;
  mha.d_model = 64;
  mha.n_heads = 8;
  mha.bias = false;
  ModelConfig gqa = mha;
  gqa.n_kv_heads = 2;
  const causal::InspectReport a = causal::inspect_model(mha);
  const causal::InspectReport b = causal::inspect_model(gqa);
  // k and v go from 64 -> 64 to 64 -> 2*8: 2 * 64 * (64 - 16) fewer weights.
  CATCH_CHECK(a.parameters.attention_per_block - b.parameters.attention_per_block == 2 * 64 * 48);
  CATCH_CHECK(a.memory.kv_cache == 4 * b.memory.kv_cache);
  CATCH_CHECK(a.flops.attention_scores == b.flops.attention_scores);  // queries still use all 8 heads
}

CATCH_TEST_CASE("inspect: the memory plan is exact bytes per dtype", "[unit][inspect]") {
  ModelConfig m;
  const causal::InspectReport fp32 = causal::inspect_model(m, 0, 2, "fp32");
  const int64_t n = fp32.parameters.total;
  CATCH_CHECK(fp32.flops.context == m.max_seq_len);  // context 0 = max_seq_len
  CATCH_CHECK(fp32.memory.bytes_per_element == 4);
  CATCH_CHECK(fp32.memory.parameters == 4 * n);
  CATCH_CHECK(fp32.memory.gradients == 4 * n);
  CATCH_CHECK(fp32.memory.optimizer == 8 * n);  // two fp32 AdamW moments
  CATCH_CHECK(fp32.memory.kv_cache == 2 * 2 * 2 * 256 * 4 * 32 * 4);
  CATCH_CHECK(fp32.memory.training == 16 * n);
  CATCH_CHECK(fp32.memory.inference == 4 * n + fp32.memory.kv_cache);
  const causal::InspectReport bf16 = causal::inspect_model(m, 0, 2, "bf16");
  CATCH_CHECK(bf16.memory.parameters == 2 * n);
  CATCH_CHECK(bf16.memory.optimizer == 8 * n);  // moments stay fp32
  CATCH_CHECK(bf16.memory.kv_cache * 2 == fp32.memory.kv_cache);
  CATCH_CHECK(causal::bytes_per_element("fp16") == 2);
  CATCH_CHECK(fp32.scaling.compute_optimal_tokens == 20 * n);
}

CATCH_TEST_CASE("inspect: a bad dtype, context, batch or model is a ConfigError", "[unit][inspect]") {
  ModelConfig m;
  CATCH_CHECK_THROWS_AS(causal::bytes_per_element("int8"), causal::ConfigError);
  CATCH_CHECK_THROWS_WITH(causal::inspect_model(m, 0, 1, "fp64"),
                          Contains("--dtype") && Contains("expected one of fp32|bf16|fp16, got \"fp64\""));
  CATCH_CHECK_THROWS_WITH(causal::inspect_model(m, 257),
                          Contains("--context") && Contains("max_seq_len = 256"));
  CATCH_CHECK_THROWS_WITH(causal::inspect_model(m, 0, 0), Contains("--batch"));
  ModelConfig bad;
  bad.d_model = 130;
  CATCH_CHECK_THROWS_WITH(causal::inspect_model(bad), Contains("model.n_heads"));
}

CATCH_TEST_CASE("inspect: the table and the JSON carry the same exact figures", "[unit][inspect]") {
  ModelConfig m;
  m.n_kv_heads = 0;  // resolved in the report
  const causal::InspectReport r = causal::inspect_model(m, 128, 4, "bf16");
  CATCH_CHECK(r.model.n_kv_heads == 4);
  const nlohmann::json j = causal::inspect_to_json(r);
  CATCH_CHECK(j["parameters"]["total"] == r.parameters.total);
  CATCH_CHECK(j["parameters"]["attention_per_block"] == r.parameters.attention_per_block);
  CATCH_CHECK(j["flops_per_token"]["training"] == r.flops.training);
  CATCH_CHECK(j["memory_bytes"]["kv_cache"] == r.memory.kv_cache);
  CATCH_CHECK(j["memory_bytes"]["optimizer"] == r.memory.optimizer);
  CATCH_CHECK(j["context"] == 128);
  CATCH_CHECK(j["batch"] == 4);
  CATCH_CHECK(j["dtype"] == "bf16");
  CATCH_CHECK(j["model"]["n_kv_heads"] == 4);
  const std::string table = causal::format_inspect(r);
  // 463,363 = the default model's total (hand sum: embeddings 33,152 + 2 blocks of 198,272 + 256 + head
  // 33,411).
  CATCH_CHECK(r.parameters.total == 463363);
  CATCH_CHECK_THAT(table, Contains("463,363"));
  CATCH_CHECK_THAT(table, Contains("KV cache"));
  CATCH_CHECK_THAT(table, Contains("AdamW"));
}

// One formula for activation memory (config/cost_model.h): `inspect` reports the bytes the doc's formula
// gives (written out here, docs/background.md#memory-split), and validation bounds a run's batch with that
// same figure, so a batch just inside the bound passes both and one just past it is refused by both.
CATCH_TEST_CASE("inspect: validation bounds the batch with the activation bytes inspect reports",
                "[unit][inspect]") {
  const causal::RunConfig run =
      causal::load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json");
  const ModelConfig& m = run.model;
  const int64_t t = m.max_seq_len, l = m.n_layers, d = m.d_model, dk = m.head_dim(), h = m.ffn_hidden;
  const int64_t c = m.ffn == causal::FfnKind::kSwiglu ? 4 : 2;
  const int64_t b = 64, bt = b * t;
  const int64_t by_hand =
      4 * (l * (bt * (6 * d + 2 * m.n_kv_heads * dk + c * h) + 2 * b * m.n_heads * t * t) +
           bt * (3 * d + 2 * m.output_vocab));
  CATCH_CHECK(causal::inspect_model(m, t, b).memory.activations == by_hand);
  CATCH_CHECK(causal::activation_bytes(m, b, t, 4) == static_cast<double>(by_hand));

  // Batches either side of 2^62 bytes of activations (the largest figure at these sizes).
  const double per_sequence = causal::activation_bytes(m, 1, t, 4);
  const auto inside = static_cast<int64_t>(causal::kLargestCostFigure / per_sequence) - 1;
  const int64_t past = inside + 2;
  CATCH_REQUIRE(causal::activation_bytes(m, inside, t, 4) < causal::kLargestCostFigure);
  CATCH_REQUIRE(causal::activation_bytes(m, past, t, 4) >= causal::kLargestCostFigure);
  auto validate_batch = [&](int64_t batch) {
    causal::RunConfig copy = run;
    copy.train.batch_size = batch;
    causal::validate(copy, "cfg.json");
  };
  CATCH_CHECK_NOTHROW(validate_batch(inside));
  CATCH_CHECK(causal::inspect_model(m, t, inside).memory.activations ==
              static_cast<int64_t>(causal::activation_bytes(m, inside, t, 4)));
  try {
    validate_batch(past);
    CATCH_FAIL("expected a ConfigError");
  } catch (const causal::ConfigError& e) {
    CATCH_CHECK(e.path() == "train.batch_size");
    CATCH_CHECK_THAT(std::string(e.what()), Contains(std::to_string(past) + " sequences"));
  }
  CATCH_CHECK_THROWS_WITH(causal::inspect_model(m, t, past),
                          Contains("--batch") && Contains(std::to_string(past) + " sequences"));
}

// Full fine-tuning that does not fit is refused with its estimate and, where adapters would fit, LoRA's
// estimate and the setting that gets it; a LoRA plan that does not fit gets no such hint.
CATCH_TEST_CASE("inspect: the memory check names LoRA's estimate when full fine-tuning does not fit",
                "[unit][inspect]") {
  ModelConfig m;
  m.d_model = 2048;
  m.n_layers = 24;
  m.n_heads = 32;
  m.max_seq_len = 128;
  m.ffn = causal::FfnKind::kSwiglu;
  m.norm = causal::NormKind::kRmsNorm;
  m.position = causal::PositionKind::kRope;
  m.inputs = {{"token", 49152}};
  m.output_vocab = 49152;
  m.tie_embeddings = true;
  const causal::InspectReport full = causal::inspect_model(m, 128, 4);
  causal::LoraConfig lora;
  lora.rank = 16;
  const causal::InspectReport adapted = causal::inspect_model(m, 128, 4, "fp32", lora);
  const int64_t full_bytes = causal::training_bytes(full.memory),
                lora_bytes = causal::training_bytes(adapted.memory);
  CATCH_REQUIRE(lora_bytes < full_bytes / 2);
  const int64_t between = (full_bytes + lora_bytes) / 2;
  CATCH_CHECK_THROWS_WITH(causal::check_training_memory(full, between, "this machine"),
                          Contains("training needs about") && Contains("train.lora.rank=16: about"));
  CATCH_CHECK_NOTHROW(causal::check_training_memory(adapted, between, "this machine"));
  CATCH_CHECK_THROWS_WITH(causal::check_training_memory(full, lora_bytes / 2, "this machine"),
                          !Contains("train.lora"));
  CATCH_CHECK_THROWS_WITH(causal::check_training_memory(adapted, lora_bytes / 2, "this machine"),
                          !Contains("train.lora.rank=16"));
  const std::string table = causal::format_inspect(adapted);
  CATCH_CHECK_THAT(table, Contains("LoRA adapters (r 16 on q,k,v,o,gate,up,down)"));
  CATCH_CHECK(causal::inspect_to_json(adapted)["parameters"]["trainable"] == adapted.parameters.adapters);

  // A held base (train.lora.base_dtype): the frozen block weights at the format's bytes each (the tied
  // head is the embedding, float32), and the memory check plans with them: a plan that fits only so.
  causal::LoraConfig held = lora;
  held.base_dtype = causal::BaseDtype::kQ4_0;
  const causal::InspectReport quantized = causal::inspect_model(m, 128, 4, "fp32", held);
  const int64_t blocks =
      static_cast<int64_t>(m.n_layers) * (4 * 2048 * 2048 + 3 * 2048 * quantized.model.ffn_hidden);
  CATCH_CHECK(quantized.parameters.held == blocks);
  CATCH_CHECK(quantized.memory.parameters == adapted.memory.parameters - blocks * 4 + blocks * 18 / 32);
  CATCH_CHECK_THAT(causal::format_inspect(quantized),
                   Contains("of which frozen weights in q4_0 (0.5625 B each)"));
  CATCH_CHECK(causal::inspect_to_json(quantized)["lora"]["base_dtype"] == "q4_0");
  const int64_t quantized_bytes = causal::training_bytes(quantized.memory);
  CATCH_CHECK_NOTHROW(
      causal::check_training_memory(quantized, (quantized_bytes + lora_bytes) / 2, "this machine"));
  CATCH_CHECK_THROWS(
      causal::check_training_memory(adapted, (quantized_bytes + lora_bytes) / 2, "this machine"));
}
