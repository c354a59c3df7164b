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
