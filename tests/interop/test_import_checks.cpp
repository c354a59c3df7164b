// What import reads before any tensor: the tensor map both directions share, and files whose
// hyperparameters or shard lists are hostile, refused as ConfigErrors naming the key (tests/fuzz/fuzz_gguf
// and fuzz_hf run the same code on arbitrary bytes).
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.h"
#include "interop/gguf_model_config.h"
#include "interop/hf_model_config.h"
#include "interop/tensor_map.h"
#include "support/small_model.h"

using namespace causal;

namespace {

// A llama GGUF file's metadata with one tensor, the embedding.
GgufFile llama_gguf() {
  GgufFile f;
  f.metadata = {{"general.architecture", GgufValue::string("llama")},
                {"llama.embedding_length", GgufValue::u32(8)},
                {"llama.block_count", GgufValue::u32(1)},
                {"llama.attention.head_count", GgufValue::u32(2)},
                {"llama.feed_forward_length", GgufValue::u32(24)},
                {"llama.context_length", GgufValue::u32(16)},
                {"llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f)},
                {"llama.rope.freq_base", GgufValue::f32(10000.0f)}};
  f.tensors.push_back({"token_embd.weight", {50, 8}, GgufTensorType::kF32, std::string(50 * 8 * 4, '\0')});
  return f;
}

void set(GgufFile& f, const std::string& key, GgufValue value) {
  for (auto& [k, v] : f.metadata)
    if (k == key) v = value;
}

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

}  // namespace

CATCH_TEST_CASE("tensor map: every parameter once, fused and transposed where the format says",
                "[unit][interop]") {
  const ModelConfig m = testing::small_llama_model(50);
  const auto llama = tensor_map(InteropFormat::kGguf, TargetArchitecture::kLlama, m);
  CATCH_CHECK(llama.size() == 1 + 9 * 2 + 1 + 1);  // embedding, blocks, final norm, untied head
  CATCH_CHECK(llama[2].causal == "blocks.0.attn.q_proj.weight");
  CATCH_CHECK(llama[2].file == "blk.0.attn_q.weight");
  CATCH_CHECK(llama[2].rotary_heads == 4);
  CATCH_CHECK(llama[3].rotary_heads == 2);  // k: the kv heads
  CATCH_CHECK(llama[3].file_shape == std::vector<int64_t>{16, 32});
  ModelConfig tied = m;
  tied.tie_embeddings = true;
  CATCH_CHECK(tensor_map(InteropFormat::kHf, TargetArchitecture::kLlama, tied).size() == 20);

  const auto gpt2 = tensor_map(InteropFormat::kHf, TargetArchitecture::kGpt2, testing::small_gpt2_model(50));
  int fused = 0;
  for (const MappedTensor& t : gpt2) {
    if (t.file != "transformer.h.1.attn.c_attn.weight") continue;
    CATCH_CHECK(t.transposed);
    CATCH_CHECK(t.file_shape == std::vector<int64_t>{32, 96});  // Conv1D: (in, out)
    CATCH_CHECK(t.part == fused++);
  }
  CATCH_CHECK(fused == 3);
  for (const MappedTensor& t :
       tensor_map(InteropFormat::kGguf, TargetArchitecture::kGpt2, testing::small_gpt2_model(50)))
    CATCH_CHECK_FALSE(t.transposed);
}

CATCH_TEST_CASE("gguf import: hostile hyperparameters are ConfigErrors before any shape", "[unit][interop]") {
  CATCH_CHECK(gguf_model_config(llama_gguf(), "m.gguf").model.n_layers == 1);
  GgufFile no_heads = llama_gguf();
  set(no_heads, "llama.attention.head_count", GgufValue::u32(0));
  CATCH_CHECK(config_error([&] { gguf_model_config(no_heads, "m.gguf"); }).find("model.n_heads") !=
              std::string::npos);
  GgufFile many_blocks = llama_gguf();
  set(many_blocks, "llama.block_count", GgufValue::u32(4000000000u));
  CATCH_CHECK(config_error([&] { gguf_model_config(many_blocks, "m.gguf"); }).find("llama.block_count") !=
              std::string::npos);
  GgufFile huge = llama_gguf();
  set(huge, "llama.embedding_length", GgufValue{GgufType::kUint64, GgufType::kUint64, uint64_t{1} << 63});
  CATCH_CHECK(config_error([&] { gguf_model_config(huge, "m.gguf"); }).find("llama.embedding_length") !=
              std::string::npos);
  GgufFile partial_rope = llama_gguf();
  partial_rope.metadata.emplace_back("llama.rope.dimension_count", GgufValue::u32(2));
  CATCH_CHECK(config_error([&] {
                gguf_model_config(partial_rope, "m.gguf");
              }).find("causal rotates the whole head") != std::string::npos);
}

CATCH_TEST_CASE("hf import: mistyped config values and shard paths are ConfigErrors", "[unit][interop]") {
  const nlohmann::json llama = {{"model_type", "llama"},   {"hidden_size", 8},
                                {"num_hidden_layers", 1},  {"num_attention_heads", 2},
                                {"intermediate_size", 24}, {"max_position_embeddings", 16},
                                {"vocab_size", 50},        {"rms_norm_eps", 1e-5}};
  CATCH_CHECK(hf_model_config(llama, "config.json").model.d_model == 8);
  auto error_with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json c = llama;
    c[key] = value;
    return config_error([&] { hf_model_config(c, "config.json"); });
  };
  // Each of these escaped as nlohmann's type_error or out_of_range before (exit 1, not 2).
  CATCH_CHECK(error_with("tie_word_embeddings", "yes").find("tie_word_embeddings") != std::string::npos);
  CATCH_CHECK(error_with("rope_scaling", {{"rope_type", "linear"}}).find("rope_scaling.factor") !=
              std::string::npos);
  CATCH_CHECK(
      error_with("rope_scaling", {{"rope_type", "linear"}, {"factor", "2"}}).find("rope_scaling.factor") !=
      std::string::npos);
  CATCH_CHECK(error_with("rope_scaling", 3).find("rope_scaling") != std::string::npos);
  CATCH_CHECK(error_with("hidden_act", std::string("si\xffu")).find("hidden_act") != std::string::npos);
  CATCH_CHECK(error_with("num_attention_heads", 0).find("model.n_heads") != std::string::npos);
  CATCH_CHECK(error_with("hidden_size", 8.5).find("hidden_size") != std::string::npos);

  const nlohmann::json index = {{"weight_map", {{"a", "model-1.safetensors"}, {"b", "model-1.safetensors"}}}};
  CATCH_CHECK(hf_shard_files(index, "index.json") == std::vector<std::string>{"model-1.safetensors"});
  for (const nlohmann::json& shard : {nlohmann::json("../model.safetensors"), nlohmann::json("/etc/x"),
                                      nlohmann::json(".."), nlohmann::json(7)}) {
    const nlohmann::json bad = {{"weight_map", {{"a", shard}}}};
    CATCH_CHECK(config_error([&] { hf_shard_files(bad, "index.json"); }).find("weight_map.a") !=
                std::string::npos);
  }
}

// Qwen2 is llama's map plus q/k/v biases, whose q and k rows are renumbered with their weights; its GGUF
// q/k rows rotate halves (llama.cpp's NEOX rope), unlike llama's. Biases a model lacks are the absent ones.
CATCH_TEST_CASE("tensor map: qwen2's q/k/v biases, its GGUF rows in halves, the biases a model lacks",
                "[unit][interop]") {
  ModelConfig m = testing::small_llama_model(50);
  m.qkv_bias = true;
  for (const InteropFormat format : {InteropFormat::kGguf, InteropFormat::kHf}) {
    const bool gguf = format == InteropFormat::kGguf;
    CATCH_INFO((gguf ? "gguf" : "hf"));
    const auto qwen2 = tensor_map(format, TargetArchitecture::kQwen2, m);
    CATCH_CHECK(qwen2.size() == tensor_map(format, TargetArchitecture::kLlama, m).size() + 3 * 2);
    std::vector<std::string> biases;
    for (const MappedTensor& t : qwen2) {
      CATCH_INFO(t.causal);
      CATCH_CHECK_FALSE(t.absent);
      if (t.causal.size() > 5 && t.causal.compare(t.causal.size() - 5, 5, ".bias") == 0 &&
          t.causal.rfind("blocks.1.", 0) == 0)
        biases.push_back(t.causal + " " + t.file);
      if (t.rotary_heads > 0) {
        CATCH_CHECK(t.file_pairing.has_value() == gguf);
        if (gguf) CATCH_CHECK(*t.file_pairing == RopePairing::kHalves);
      }
    }
    const std::vector<std::string> expected =
        gguf ? std::vector<std::string>{"blocks.1.attn.q_proj.bias blk.1.attn_q.bias",
                                        "blocks.1.attn.k_proj.bias blk.1.attn_k.bias",
                                        "blocks.1.attn.v_proj.bias blk.1.attn_v.bias"}
             : std::vector<std::string>{"blocks.1.attn.q_proj.bias model.layers.1.self_attn.q_proj.bias",
                                        "blocks.1.attn.k_proj.bias model.layers.1.self_attn.k_proj.bias",
                                        "blocks.1.attn.v_proj.bias model.layers.1.self_attn.v_proj.bias"};
    CATCH_CHECK(biases == expected);
    CATCH_CHECK(qwen2[3].causal == "blocks.0.attn.q_proj.bias");
    CATCH_CHECK(qwen2[3].rotary_heads == 4);
    CATCH_CHECK(qwen2[3].file_shape == std::vector<int64_t>{32});
    CATCH_CHECK(qwen2[5].causal == "blocks.0.attn.k_proj.bias");
    CATCH_CHECK(qwen2[5].rotary_heads == 2);
    CATCH_CHECK(qwen2[7].causal == "blocks.0.attn.v_proj.bias");
    CATCH_CHECK(qwen2[7].rotary_heads == 0);
    for (const MappedTensor& t : tensor_map(format, TargetArchitecture::kLlama, m))
      CATCH_CHECK_FALSE(t.file_pairing.has_value());
  }

  // gpt2 with q/k/v biases only: c_attn's bias slices are the model's, every other bias absent.
  ModelConfig g = testing::small_gpt2_model(50);
  g.bias = false;
  g.qkv_bias = true;
  int present = 0, absent = 0;
  for (const MappedTensor& t : tensor_map(InteropFormat::kHf, TargetArchitecture::kGpt2, g)) {
    if (t.causal.find(".bias") == std::string::npos) continue;
    const bool qkv = t.file.find("c_attn.bias") != std::string::npos;
    CATCH_CHECK(t.absent == !qkv);
    (qkv ? present : absent)++;
  }
  CATCH_CHECK(present == 2 * 3);
  CATCH_CHECK(absent == 2 * 5 + 1);  // attn_norm, o_proj, ffn_norm, fc_in, fc_out per block; ln_f
}

CATCH_TEST_CASE("hf import: qwen2 has q/k/v biases, gpt2's activation picks the GELU", "[unit][interop]") {
  const nlohmann::json qwen2 = {{"model_type", "qwen2"},
                                {"hidden_size", 8},
                                {"num_hidden_layers", 1},
                                {"num_attention_heads", 2},
                                {"num_key_value_heads", 1},
                                {"intermediate_size", 24},
                                {"max_position_embeddings", 16},
                                {"vocab_size", 50},
                                {"rms_norm_eps", 1e-6},
                                {"tie_word_embeddings", true},
                                {"use_sliding_window", false},
                                {"sliding_window", nullptr},
                                {"layer_types", {"full_attention"}}};
  const ImportedConfig q = hf_model_config(qwen2, "config.json");
  CATCH_CHECK(q.arch == TargetArchitecture::kQwen2);
  CATCH_CHECK(q.model.qkv_bias);
  CATCH_CHECK_FALSE(q.model.bias);
  CATCH_CHECK(q.model.tie_embeddings);
  CATCH_CHECK(q.model.rope.pairing == RopePairing::kHalves);
  nlohmann::json sliding = qwen2;
  sliding["use_sliding_window"] = true;
  CATCH_CHECK(config_error([&] { hf_model_config(sliding, "config.json"); }).find("use_sliding_window") !=
              std::string::npos);
  sliding = qwen2;
  sliding["layer_types"] = {"sliding_attention"};
  CATCH_CHECK(config_error([&] { hf_model_config(sliding, "config.json"); }).find("layer_types") !=
              std::string::npos);

  const nlohmann::json gpt2 = {{"model_type", "gpt2"},
                               {"n_embd", 8},
                               {"n_layer", 1},
                               {"n_head", 2},
                               {"n_positions", 16},
                               {"vocab_size", 50},
                               {"layer_norm_epsilon", 1e-5}};
  auto ffn_of = [&](const nlohmann::json& activation) {
    nlohmann::json c = gpt2;
    if (!activation.is_null()) c["activation_function"] = activation;
    return hf_model_config(c, "config.json").model.ffn;
  };
  CATCH_CHECK(ffn_of("gelu") == FfnKind::kGelu);
  CATCH_CHECK(ffn_of("gelu_new") == FfnKind::kGeluTanh);
  CATCH_CHECK(ffn_of("gelu_pytorch_tanh") == FfnKind::kGeluTanh);
  CATCH_CHECK(ffn_of(nullptr) == FfnKind::kGeluTanh);  // GPT2Config's default is gelu_new
  CATCH_CHECK(config_error([&] { ffn_of("relu"); }).find("activation_function") != std::string::npos);
}

CATCH_TEST_CASE("gguf import: qwen2 rotates halves and has q/k/v biases, gpt2 runs the tanh GELU",
                "[unit][interop]") {
  GgufFile f = llama_gguf();
  for (auto& [key, value] : f.metadata) {
    if (key.rfind("llama.", 0) == 0) key = "qwen2." + key.substr(6);
    if (key == "general.architecture") value = GgufValue::string("qwen2");
  }
  const ImportedConfig q = gguf_model_config(f, "m.gguf");
  CATCH_CHECK(q.arch == TargetArchitecture::kQwen2);
  CATCH_CHECK(q.model.qkv_bias);
  CATCH_CHECK(q.model.rope.pairing == RopePairing::kHalves);
  CATCH_CHECK(gguf_model_config(llama_gguf(), "m.gguf").model.rope.pairing == RopePairing::kInterleaved);

  GgufFile g;
  g.metadata = {{"general.architecture", GgufValue::string("gpt2")},
                {"gpt2.embedding_length", GgufValue::u32(8)},
                {"gpt2.block_count", GgufValue::u32(1)},
                {"gpt2.attention.head_count", GgufValue::u32(2)},
                {"gpt2.feed_forward_length", GgufValue::u32(32)},
                {"gpt2.context_length", GgufValue::u32(16)},
                {"gpt2.attention.layer_norm_epsilon", GgufValue::f32(1e-5f)}};
  g.tensors.push_back({"token_embd.weight", {50, 8}, GgufTensorType::kF32, std::string(50 * 8 * 4, '\0')});
  CATCH_CHECK(gguf_model_config(g, "m.gguf").model.ffn == FfnKind::kGeluTanh);
}
