// check_exportable: each model feature a format cannot express is refused with a ConfigError (exit 2)
// that names the field, its value and what is supported; the three architectures are accepted.
#include <catch2/catch.hpp>
#include <functional>

#include "core/errors.h"
#include "interop/export_source.h"
#include "support/small_model.h"

using namespace causal;

namespace {

ModelConfig llama_model() { return testing::small_llama_model(259); }

ModelConfig gpt2_model() { return testing::small_gpt2_model(259); }

void check_refused(const ModelConfig& m, const std::string& field, const std::string& value) {
  for (const std::string format : {"gguf", "hf"}) {
    CATCH_INFO(format << " " << field);
    try {
      check_exportable(m, format, "run/config.json");
      CATCH_FAIL("accepted");
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      CATCH_CHECK(e.exit_code() == 2);
      CATCH_CHECK(e.path() == field);
      CATCH_CHECK(what.find(value) != std::string::npos);
      CATCH_CHECK(what.find("supported: ") != std::string::npos);
      CATCH_CHECK(what.find("run/config.json") != std::string::npos);
    }
  }
}

}  // namespace

CATCH_TEST_CASE("exportable: llama-, qwen2- and gpt2-shaped models are accepted, the rest refused by field",
                "[unit][interop]") {
  CATCH_CHECK(check_exportable(llama_model(), "gguf", "c") == TargetArchitecture::kLlama);
  CATCH_CHECK(check_exportable(gpt2_model(), "hf", "c") == TargetArchitecture::kGpt2);
  ModelConfig m = llama_model();
  m.rope.scaling = RopeScaling::kLinear;
  CATCH_CHECK(check_exportable(m, "gguf", "c") == TargetArchitecture::kLlama);
  m.qkv_bias = true;  // biases on q, k and v only: Qwen2
  CATCH_CHECK(check_exportable(m, "gguf", "c") == TargetArchitecture::kQwen2);
  CATCH_CHECK(check_exportable(m, "hf", "c") == TargetArchitecture::kQwen2);
  m = gpt2_model();
  m.ffn = FfnKind::kGeluTanh;  // GPT-2's own GELU
  CATCH_CHECK(check_exportable(m, "hf", "c") == TargetArchitecture::kGpt2);
  m.bias = false;
  m.qkv_bias = true;  // gpt2's fused c_attn bias holds them, the other biases are zeros
  CATCH_CHECK(check_exportable(m, "gguf", "c") == TargetArchitecture::kGpt2);

  m = llama_model();
  m.qk_norm = true;
  check_refused(m, "model.qk_norm", "true");
  m = gpt2_model();
  m.ffn = FfnKind::kRelu;
  check_refused(m, "model.ffn", "\"relu\"");
  m = llama_model();
  m.inputs.push_back(InputField{"value", 9});
  check_refused(m, "model.inputs", "2 input fields");
  m = llama_model();
  m.output_vocab = 300;
  check_refused(m, "model.output_vocab", "300");
  m = llama_model();
  m.rope.scaling = RopeScaling::kYarn;
  check_refused(m, "model.rope.scaling", "\"yarn\"");
  m.rope.scaling = RopeScaling::kNtk;
  check_refused(m, "model.rope.scaling", "\"ntk\"");
  m = llama_model();
  m.bias = true;
  check_refused(m, "model.bias", "true");
  m = llama_model();
  m.ffn = FfnKind::kGelu;
  check_refused(m, "model.ffn", "\"gelu\"");
  m = llama_model();
  m.ffn = FfnKind::kGeluTanh;
  check_refused(m, "model.ffn", "\"gelu_tanh\"");
  m = gpt2_model();
  m.ffn = FfnKind::kSwiglu;
  check_refused(m, "model.ffn", "\"swiglu\"");
  m = gpt2_model();
  m.n_kv_heads = 1;
  check_refused(m, "model.n_kv_heads", "1");
  m = gpt2_model();
  m.tie_embeddings = false;
  check_refused(m, "model.bias", "untied head");
  m = gpt2_model();
  m.position = PositionKind::kNone;
  check_refused(m, "model.position", "\"none\"");
}
