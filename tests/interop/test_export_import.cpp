// `causal export` and `causal import` through the binary: export then import gives back the same weights
// bit for bit in F32 (GGUF and HF, llama, qwen2 and gpt2, both RoPE pairings, tied and untied, with and
// without biases), and whatever a format cannot express is refused with exit 2 naming the field, before
// anything is written.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "io/safetensors.h"
#include "support/cli.h"

using namespace causal;
using namespace causal::testing;

namespace {

const std::string kTiny =
    "--set model.d_model=32 --set model.n_layers=2 --set model.n_heads=4 --set model.max_seq_len=64 "
    "--set data.seq_len=64 --set train.batch_size=4 --set train.steps=2 --set train.schedule.warmup_steps=0 "
    "--set model.dropout=0 ";
const std::string kLlama =
    "--set model.ffn=swiglu --set model.norm=rmsnorm --set model.position=rope --set model.bias=false ";
const std::string kGpt2 =
    "--set model.ffn=gelu --set model.norm=layernorm --set model.position=learned --set model.n_kv_heads=4 ";

// Trains a 2-step run of configs/text-small.json with `sets` into `dir`.
void train(const fs::path& dir, const std::string& sets,
           const std::string& config = "configs/text-small.json") {
  const Result r = run_causal("train --config " + config + " " + kTiny + sets + " --run-dir " + dir.string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
}

fs::path newest_checkpoint(const fs::path& run) {
  fs::path newest;
  for (const auto& e : fs::directory_iterator(run / "checkpoints"))
    if (e.path().filename().string().rfind("step_", 0) == 0 && e.path() > newest) newest = e.path();
  return newest;
}

// Every tensor of the two checkpoints' model.safetensors equal, bit for bit, under the same names.
void check_same_weights(const fs::path& a, const fs::path& b) {
  const NamedTensors x = load_safetensors((newest_checkpoint(a) / "model.safetensors").string());
  const NamedTensors y = load_safetensors((newest_checkpoint(b) / "model.safetensors").string());
  CATCH_REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    CATCH_INFO(x[i].first);
    CATCH_CHECK(x[i].first == y[i].first);
    CATCH_CHECK(torch::equal(x[i].second, y[i].second));
  }
}

void round_trip(const fs::path& root, const std::string& name, const std::string& sets,
                const std::string& data) {
  const fs::path run = root / name;
  train(run, sets + " " + data);
  for (const std::string format : {"gguf", "hf"}) {
    CATCH_INFO(name << " via " << format);
    const fs::path file = root / (name + "." + format);
    Result r = run_causal("export --run " + run.string() + " --format " + format + " --out " + file.string());
    CATCH_INFO(r.err);
    CATCH_REQUIRE(r.code == 0);
    const fs::path back = root / (name + "-" + format + "-back");
    r = run_causal("import --format " + format + " --input " + file.string() + " --out " + back.string() +
                   " " + data);
    CATCH_INFO(r.err);
    CATCH_REQUIRE(r.code == 0);
    check_same_weights(run, back);
    // The imported run has the trained run's model section (the provenance restored the pairing).
    CATCH_CHECK(nlohmann::json::parse(slurp(run / "config.json"))["model"] ==
                nlohmann::json::parse(slurp(back / "config.json"))["model"]);
  }
}

}  // namespace

CATCH_TEST_CASE("export: GGUF and HF exports import back bit-exact in f32", "[e2e][interop]") {
  const fs::path root = scratch("interop_roundtrip");
  const std::string bytes =
      "--set data.train=data/brown-sample.train.tok --set data.val=data/brown-sample.val.tok ";
  const std::string bpe =
      "--set data.train=data/brown-sample.bpe.train.tok --set data.val=data/brown-sample.bpe.val.tok ";
  round_trip(
      root, "llama-halves",
      kLlama + "--set model.rope.pairing=halves --set model.n_kv_heads=2 --set model.tie_embeddings=false",
      bytes);
  round_trip(root, "llama-interleaved-bpe",
             kLlama +
                 "--set model.rope.pairing=interleaved --set model.n_kv_heads=1 "
                 "--set model.inputs[0].vocab=1024 --set model.output_vocab=1024",
             bpe);
  round_trip(root, "gpt2-nobias-untied", kGpt2 + "--set model.bias=false --set model.tie_embeddings=false",
             bytes);
  round_trip(root, "gpt2-bias-tied", kGpt2 + "--set model.bias=true --set model.tie_embeddings=true", bytes);
  // Qwen2 (q/k/v biases; GGUF and HF both keep halves rows, so interleaved is renumbered, biases too) and a
  // tanh-GELU gpt2 whose only biases are q, k and v (the rest written as zeros, dropped again on import).
  round_trip(root, "qwen2-interleaved",
             kLlama +
                 "--set model.qkv_bias=true --set model.rope.pairing=interleaved --set model.n_kv_heads=2 "
                 "--set model.tie_embeddings=true",
             bytes);
  round_trip(root, "gpt2-tanh-qkv-bias",
             kGpt2 + "--set model.ffn=gelu_tanh --set model.bias=false --set model.qkv_bias=true", bytes);
  fs::remove_all(root);
}

CATCH_TEST_CASE("export: what a format cannot express is refused with exit 2, naming the field",
                "[e2e][interop]") {
  const fs::path root = scratch("interop_refusals");
  struct Case {
    std::string name, sets, field, config = "configs/text-small.json";
  };
  const std::vector<Case> cases = {
      {"qk-norm", kLlama + "--set model.qk_norm=true", "model.qk_norm"},
      {"relu", kGpt2 + "--set model.ffn=relu", "model.ffn"},
      {"ntk", kLlama + "--set model.rope.scaling=ntk --set model.rope.factor=2", "model.rope.scaling"},
      {"llama-bias", kLlama + "--set model.bias=true --set model.tie_embeddings=true", "model.bias"},
      {"fields", "--set model.d_model=32 --set train.steps=1", "model.inputs", "configs/retrieval.json"},
  };
  for (const Case& c : cases) {
    CATCH_INFO(c.name);
    const fs::path run = root / c.name;
    const std::string tiny = c.config == "configs/retrieval.json" ? "" : kTiny;
    const Result t =
        run_causal("train --config " + c.config + " " + tiny + c.sets + " --run-dir " + run.string());
    CATCH_INFO(t.err);
    CATCH_REQUIRE(t.code == 0);
    for (const std::string format : {"gguf", "hf"}) {
      const fs::path out = root / (c.name + "." + format);
      const Result r =
          run_causal("export --run " + run.string() + " --format " + format + " --out " + out.string());
      CATCH_INFO(format << ": " << r.err);
      CATCH_CHECK(r.code == 2);
      CATCH_CHECK(r.err.find(c.field) != std::string::npos);
      CATCH_CHECK(r.err.find("supported") != std::string::npos);
      CATCH_CHECK(!fs::exists(out));
    }
  }
  fs::remove_all(root);
}

CATCH_TEST_CASE("import: unknown architectures and missing keys are refused with exit 2", "[e2e][interop]") {
  const fs::path root = scratch("interop_import_refusals");
  fs::create_directories(root / "mamba");
  std::ofstream(root / "mamba" / "config.json") << R"({"model_type": "mamba"})";
  Result r = run_causal("import --format hf --input " + (root / "mamba").string() + " --out " +
                        (root / "r1").string());
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK(r.err.find("model_type") != std::string::npos);
  fs::create_directories(root / "nohidden");
  std::ofstream(root / "nohidden" / "config.json") << R"({"model_type": "llama", "num_hidden_layers": 2})";
  r = run_causal("import --format hf --input " + (root / "nohidden").string() + " --out " +
                 (root / "r2").string());
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK(r.err.find("hidden_size") != std::string::npos);
  CATCH_CHECK(!fs::exists(root / "r1"));
  CATCH_CHECK(!fs::exists(root / "r2"));
  fs::remove_all(root);
}

// An import without data is a run folder that everything but training takes as it is; training takes any
// data the recorded tokenizer encoded, and refuses data of another tokenizer.
CATCH_TEST_CASE("import: a GGUF imported without data serves eval, generate, export and then training",
                "[e2e][interop]") {
  const fs::path root = scratch("interop_import_no_data");
  const std::string bytes =
      "--set data.train=data/brown-sample.train.tok --set data.val=data/brown-sample.val.tok ";
  train(root / "trained", kLlama + "--set model.n_kv_heads=2 " + bytes);
  const fs::path file = root / "trained.gguf";
  Result r =
      run_causal("export --run " + (root / "trained").string() + " --format gguf --out " + file.string());
  CATCH_REQUIRE(r.code == 0);
  const fs::path run = root / "imported";
  r = run_causal("import --format gguf --input " + file.string() + " --out " + run.string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK(r.out.find("--set data.train=TRAIN.tok --set data.val=VAL.tok") != std::string::npos);
  check_same_weights(root / "trained", run);
  CATCH_CHECK(nlohmann::json::parse(slurp(run / "tokenizer.json"))["name"] == "bytes");

  r = run_causal("generate --run " + run.string() + " --prompt 'The ' --temperature 0 --max-new-tokens 5");
  CATCH_CHECK(r.code == 0);
  r = run_causal("export --run " + run.string() + " --format hf --out " + (root / "again-hf").string());
  CATCH_CHECK(r.code == 0);
  // Evaluation and training name the data they lack.
  r = run_causal("eval --run " + run.string());
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK(r.err.find("data.val") != std::string::npos);
  r = run_causal("eval --run " + run.string() + " --set data.val=data/brown-sample.val.tok");
  CATCH_CHECK(r.code == 0);
  r = run_causal("train --run-dir " + run.string() + " --resume auto --set train.steps=2");
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK(r.err.find("data.val") != std::string::npos);
  CATCH_CHECK(!fs::exists(newest_checkpoint(run).parent_path() / "step_00000002"));
  // Data of another tokenizer is refused, naming it; the model's own trains.
  r = run_causal("train --run-dir " + run.string() +
                 " --resume auto --set train.steps=2 --set data.train=data/brown-sample.bpe.train.tok "
                 "--set data.val=data/brown-sample.bpe.val.tok");
  CATCH_CHECK(r.code != 0);
  CATCH_CHECK(r.err.find("brown-sample.bpe") != std::string::npos);
  r = run_causal("train --run-dir " + run.string() + " --resume auto --set train.steps=2 " + bytes);
  CATCH_INFO(r.err);
  CATCH_CHECK(r.code == 0);
  CATCH_CHECK(fs::exists(run / "checkpoints" / "step_00000002"));
  fs::remove_all(root);
}
