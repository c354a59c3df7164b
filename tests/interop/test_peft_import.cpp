// PEFT adapter import (interop/peft_import.h): causal's own PEFT export read back bit for bit onto its base
// run (llama in both RoPE pairings, qwen2, GPT-2's fused c_attn dense and block-diagonal), the run it
// writes used by eval, generate, train --resume and export, every refusal by name with nothing written,
// and (label interop, hidden) adapters that Python's PEFT created on causal's HF export scored by causal as
// PEFT scores them. tests/interop/adapters.py runs the Python side; without its packages: SKIPPED.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "core/errors.h"
#include "interop/adapter_export.h"
#include "interop/export_source.h"
#include "interop/peft_import.h"
#include "interop/run_import.h"
#include "io/safetensors.h"
#include "review/checkpoint_model.h"
#include "support/adapters_python.h"
#include "support/byte_docs.h"
#include "support/cli.h"
#include "support/document_logprobs.h"
#include "support/lora_adapters.h"
#include "support/scratch_dir.h"

using namespace causal;
using namespace causal::testing;

// Named, not anonymous: the unity build compiles this file with the other interop tests.
namespace peft_import_test {

constexpr double kLogprobTolerance = 1e-4;  // per token, f32 weights
constexpr double kAppliedAtLeast = 1e-2;    // base vs adapted: the adapter must move log-probs this much

// A base run folder `dir`: the weights imported without data (bytes tokenizer), a step-0 full checkpoint.
fs::path base_run(const fs::path& dir, const ModelConfig& m, uint64_t seed,
                  const std::vector<std::string>& overrides = {}) {
  ImportRequest request;
  request.out = dir.string();
  request.overrides = overrides;
  import_run(lora_interop_model(m, lora_base_weights(m, seed)), "test", request);
  return dir;
}

std::map<std::string, at::Tensor> tensors_of(const fs::path& file) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : load_safetensors(file.string())) out[name] = t;
  return out;
}

std::map<std::string, at::Tensor> base_weights(const fs::path& run) {
  return tensors_of(find_checkpoint(run, "") / "model.safetensors");
}

std::string import_into(const fs::path& peft, const fs::path& base, const fs::path& out) {
  ImportRequest request;
  request.base = base.string();
  request.out = out.string();
  return import_peft(peft.string(), request);
}

// The product path of a weight: "blocks.0.attn.q_proj.weight" -> "blocks.0.attn.q_proj".
std::string path_of(const std::string& parameter) { return parameter.substr(0, parameter.size() - 7); }

// The invariant: an adapter causal exports as PEFT comes back as the same adapters (bit for bit), under the
// same train.lora, on the same base, and the run computes base + adapters; exporting it again writes the
// same PEFT tensors. Not vacuous: B is random and non-zero, and q/k rows move in the interleaved model.
CATCH_TEST_CASE("peft import: causal's PEFT export comes back bit for bit on its base run",
                "[unit][interop]") {
  struct Case {
    std::string name;
    ModelConfig model;
    std::vector<std::string> targets;
    bool rslora;
    std::vector<std::string> kinds;  // train.lora.targets expected
  };
  const std::vector<Case> cases = {
      {"llama",
       lora_llama_model(),
       {"attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.o_proj.weight",
        "ffn.gate_proj.weight", "ffn.up_proj.weight", "ffn.down_proj.weight", "head.weight"},
       false,
       {"q", "k", "v", "o", "gate", "up", "down", "head"}},
      {"llama-interleaved",
       lora_llama_model(RopePairing::kInterleaved),
       {"attn.q_proj.weight", "attn.k_proj.weight", "ffn.up_proj.weight"},
       true,
       {"q", "k", "up"}},
      {"qwen2",
       lora_qwen2_model(),
       {"attn.q_proj.weight", "attn.v_proj.weight", "ffn.down_proj.weight"},
       true,
       {"q", "v", "down"}},
      // c_attn block-diagonal of rank 2 r (rank_pattern, alpha_pattern), k's rows zero.
      {"gpt2-qv",
       small_gpt2_model(259),
       {"attn.q_proj.weight", "attn.v_proj.weight", "attn.o_proj.weight", "ffn.fc_in.weight",
        "ffn.fc_out.weight"},
       false,
       {"q", "v", "o", "up", "down"}},
      {"gpt2-qkv",
       small_gpt2_model(259),
       {"attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight"},
       true,
       {"q", "k", "v"}},
      // q alone: c_attn of rank r, k's and v's rows zero in every layer, which are then no adapters.
      {"gpt2-q", small_gpt2_model(259), {"attn.q_proj.weight", "ffn.fc_out.weight"}, false, {"q", "down"}},
  };
  for (const Case& c : cases) {
    CATCH_INFO(c.name);
    const ScratchDir scratch("peft_import_" + c.name);
    const fs::path base = base_run(scratch.path / "base", c.model, 3);
    const std::map<std::string, at::Tensor> weights = base_weights(base);
    torch::manual_seed(4);
    const LoraAdapter adapter = random_lora_adapter(c.model, weights, c.targets, 4, 8.0, c.rslora);
    write_peft_adapter(adapter, scratch.path / "peft", base.string());
    const fs::path checkpoint = import_into(scratch.path / "peft", base, scratch.path / "new");

    const std::map<std::string, at::Tensor> imported =
        tensors_of(fs::path(checkpoint) / "adapter.safetensors");
    CATCH_CHECK(imported.size() == 2 * adapter.tensors.size());
    for (const LoraTensors& t : adapter.tensors) {
      CATCH_INFO(t.parameter);
      CATCH_REQUIRE(imported.count(path_of(t.parameter) + ".lora.a"));
      CATCH_CHECK(torch::equal(imported.at(path_of(t.parameter) + ".lora.a"), t.a));
      CATCH_CHECK(torch::equal(imported.at(path_of(t.parameter) + ".lora.b"), t.b));
    }
    const CheckpointInfo info = read_checkpoint(checkpoint);
    CATCH_CHECK(info.state.step == 0);
    CATCH_REQUIRE(info.state.base.has_value());
    const BaseCheckpoint expected_base = base_of(find_checkpoint(base, ""), std::nullopt);
    CATCH_CHECK(info.state.base->dir == expected_base.dir);
    CATCH_CHECK(info.state.base->model_sha256 == expected_base.model_sha256);
    CATCH_CHECK(!fs::exists(fs::path(checkpoint) / "model.safetensors"));
    const nlohmann::json lora = info.config["train"]["lora"];
    CATCH_CHECK(lora["rank"] == 4);
    CATCH_CHECK(lora["alpha"] == 8.0);
    CATCH_CHECK(lora["rslora"] == c.rslora);
    CATCH_CHECK(lora["targets"] == nlohmann::json(c.kinds));
    CATCH_CHECK(info.config["model"] == read_checkpoint(find_checkpoint(base, "")).config["model"]);

    // The run computes base + scale * B A, as eval and generate load it.
    std::map<std::string, at::Tensor> folded = weights;
    for (const LoraTensors& t : adapter.tensors)
      folded[t.parameter] = weights.at(t.parameter) + lora_scale(adapter) * torch::matmul(t.b, t.a);
    torch::manual_seed(0);
    Transformer reference(c.model);
    {
      torch::NoGradGuard no_grad;
      for (auto& item : reference->named_parameters()) item.value().copy_(folded.at(item.key()));
    }
    reference->eval();
    CheckpointModel loaded = load_checkpoint_model((scratch.path / "new").string(), "", {});
    const torch::Tensor ids = torch::randint(0, 259, {1, 12}, torch::kLong);
    torch::NoGradGuard no_grad;
    const torch::Tensor want = reference->forward({ids}).logits, got = loaded.model->forward({ids}).logits;
    CATCH_CHECK((want - got).abs().max().item<double>() < 1e-4);

    // Exported again: the same PEFT tensors, name for name and bit for bit.
    write_peft_adapter(lora_adapter_of(load_export_source((scratch.path / "new").string(), ""), "peft"),
                       scratch.path / "again", base.string());
    const auto first = tensors_of(scratch.path / "peft" / "adapter_model.safetensors");
    const auto second = tensors_of(scratch.path / "again" / "adapter_model.safetensors");
    CATCH_CHECK(first.size() == second.size());
    for (const auto& [name, t] : first) {
      CATCH_INFO(name);
      CATCH_REQUIRE(second.count(name));
      CATCH_CHECK(torch::equal(second.at(name), t));
    }
  }
}

// PEFT's own layout for GPT-2 (what get_peft_model writes): one dense c_attn adapter, B's q, k and v row
// blocks sharing A, which become three adapters of the same rank.
CATCH_TEST_CASE("peft import: a dense GPT-2 c_attn adapter splits into q, k and v sharing A",
                "[unit][interop]") {
  const ScratchDir scratch("peft_import_dense");
  const ModelConfig m = small_gpt2_model(259);
  const fs::path base = base_run(scratch.path / "base", m, 5);
  torch::manual_seed(6);
  const LoraAdapter written =
      random_lora_adapter(m, base_weights(base), {"attn.q_proj.weight"}, 4, 8.0, false);
  write_peft_adapter(written, scratch.path / "peft", base.string());
  // Replace each c_attn B by a dense random one.
  NamedTensors tensors = load_safetensors((scratch.path / "peft" / "adapter_model.safetensors").string());
  for (auto& [name, t] : tensors)
    if (name.find("lora_B") != std::string::npos) t = torch::randn({96, 4});
  save_safetensors((scratch.path / "peft" / "adapter_model.safetensors").string(), tensors);
  const fs::path checkpoint = import_into(scratch.path / "peft", base, scratch.path / "new");
  const auto imported = tensors_of(checkpoint / "adapter.safetensors");
  const auto file = tensors_of(scratch.path / "peft" / "adapter_model.safetensors");
  CATCH_CHECK(imported.size() == 2 * 3 * 2);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string module = "base_model.model.transformer.h." + std::to_string(layer) + ".attn.c_attn";
    const at::Tensor a = file.at(module + ".lora_A.weight"), b = file.at(module + ".lora_B.weight");
    int part = 0;
    for (const char* p : {"q", "k", "v"}) {
      const std::string path = "blocks." + std::to_string(layer) + ".attn." + p + "_proj";
      CATCH_CHECK(torch::equal(imported.at(path + ".lora.a"), a));
      CATCH_CHECK(torch::equal(imported.at(path + ".lora.b"), b.narrow(0, 32 * part++, 32)));
    }
  }
  CATCH_CHECK(read_checkpoint(checkpoint).config["train"]["lora"]["targets"] ==
              nlohmann::json({"q", "k", "v"}));
}

// Each case edits a valid export; the invariant: a refusal names its file and key, and writes nothing.
CATCH_TEST_CASE("peft import: what train.lora cannot hold is refused by name, nothing written",
                "[unit][interop]") {
  const ScratchDir scratch("peft_import_refusals");
  const fs::path llama = base_run(scratch.path / "llama", lora_llama_model(), 7);
  const fs::path gpt2 = base_run(scratch.path / "gpt2", small_gpt2_model(259), 7);
  torch::manual_seed(8);
  const LoraAdapter llama_adapter = random_lora_adapter(
      lora_llama_model(), base_weights(llama), {"attn.q_proj.weight", "attn.v_proj.weight"}, 4, 8.0, false);
  const LoraAdapter gpt2_adapter =
      random_lora_adapter(small_gpt2_model(259), base_weights(gpt2), {"attn.q_proj.weight"}, 4, 8.0, false);
  const fs::path out = scratch.path / "new";
  int n = 0;
  // A fresh copy of the export, edited by `config` and `tensors`, imported; returns the error's text.
  const auto refused = [&](const LoraAdapter& adapter, const fs::path& base,
                           const std::function<void(nlohmann::json&)>& config,
                           const std::function<void(NamedTensors&)>& tensors = {}) -> std::string {
    const fs::path dir = scratch.path / ("peft" + std::to_string(n++));
    write_peft_adapter(adapter, dir, base.string());
    nlohmann::json json = nlohmann::json::parse(slurp(dir / "adapter_config.json"));
    if (config) config(json);
    std::ofstream(dir / "adapter_config.json") << json.dump(2);
    if (tensors) {
      NamedTensors t = load_safetensors((dir / "adapter_model.safetensors").string());
      tensors(t);
      save_safetensors((dir / "adapter_model.safetensors").string(), t);
    }
    try {
      import_into(dir, base, out);
    } catch (const ConfigError& e) {
      CATCH_CHECK_FALSE(fs::exists(out));
      return e.what();
    }
    CATCH_FAIL("not refused: " << json.dump());
    return "";
  };
  const auto key = [](const std::string& k) { return Catch::Contains("adapter_config.json: " + k + ": "); };
  const auto set = [](const std::string& k, nlohmann::json v) {
    return [k, v](nlohmann::json& j) { j[k] = v; };
  };
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("peft_type", "PREFIX_TUNING")), key("peft_type"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("task_type", "SEQ_CLS")), key("task_type"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("modules_to_save", {"lm_head"})),
                   key("modules_to_save"));
  // DoRA: every adapted module needs its magnitude, and GPT-2's fused c_attn (q, k and v) cannot have one.
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("use_dora", "yes")), key("use_dora"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("use_dora", true)),
                   Catch::Contains("q_proj.lora_magnitude_vector: missing"));
  CATCH_CHECK_THAT(refused(gpt2_adapter, gpt2, set("use_dora", true),
                           [](NamedTensors& t) {
                             t.emplace_back(
                                 "base_model.model.transformer.h.0.attn.c_attn.lora_magnitude_vector",
                                 torch::ones({96}));
                           }),
                   Catch::Contains("several causal products"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, {},
                           [](NamedTensors& t) {
                             t.emplace_back(
                                 "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector",
                                 torch::ones({32}));
                           }),
                   key("use_dora"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("bias", "all")), key("bias"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("layers_to_transform", {0})),
                   key("layers_to_transform"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("layers_pattern", "layers")), key("layers_pattern"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("r", 0)), key("r"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("target_modules", {"q_proj", "v_proj", "embed_tokens"})),
                   key("target_modules") && Catch::Contains("embed_tokens"));
  CATCH_CHECK_THAT(refused(gpt2_adapter, gpt2, set("target_modules", {"c_attn", "lm_head"})),
                   key("target_modules") && Catch::Contains("tied"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("target_modules", {"q_proj", "v_proj", "k_proj"})),
                   Catch::Contains("adapter_model.safetensors") && Catch::Contains("k_proj") &&
                       Catch::Contains("missing"));
  // One rank and one scale for all: q at rank 2 beside v at 4, or v's alpha doubled.
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("rank_pattern", {{"q_proj", 2}}),
                           [](NamedTensors& t) {
                             for (auto& [name, x] : t) {
                               if (name.find("q_proj.lora_A") != std::string::npos)
                                 x = x.narrow(0, 0, 2).clone();
                               if (name.find("q_proj.lora_B") != std::string::npos)
                                 x = x.narrow(1, 0, 2).clone();
                             }
                           }),
                   key("rank_pattern") && Catch::Contains("one rank"));
  CATCH_CHECK_THAT(refused(llama_adapter, llama, set("alpha_pattern", {{"v_proj", 16}})),
                   key("alpha_pattern") && Catch::Contains("one scale"));
  // A kind on some blocks only (the export names the adapted modules by their full paths).
  torch::manual_seed(9);
  const LoraAdapter partial =
      random_lora_adapter(lora_llama_model(), base_weights(llama), {".0.attn.q_proj.weight"}, 4, 8.0, false);
  CATCH_CHECK_THAT(refused(partial, llama, {}), key("target_modules") && Catch::Contains("partial"));
  const std::string q_b = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
  CATCH_CHECK_THAT(refused(llama_adapter, llama, {},
                           [&](NamedTensors& t) {
                             for (auto& [name, x] : t)
                               if (name == q_b) x = torch::zeros({31, 4});
                           }),
                   Catch::Contains("adapter_model.safetensors: " + q_b + ": ") && Catch::Contains("[32, 4]"));
  const std::string stray = "base_model.model.model.embed_tokens.weight";
  CATCH_CHECK_THAT(refused(llama_adapter, llama, {},
                           [&](NamedTensors& t) {
                             t.emplace_back(stray, torch::zeros({259, 32}));
                           }),
                   Catch::Contains("adapter_model.safetensors: " + stray + ": "));

  // A copy of a base weight (PEFT saves lm_head's when it adapts it) must be the base's.
  const std::string head_copy = "base_model.model.lm_head.base_layer.weight";
  CATCH_CHECK_THAT(refused(llama_adapter, llama, {},
                           [&](NamedTensors& t) {
                             t.emplace_back(head_copy, base_weights(llama).at("head.weight") + 1.0f);
                           }),
                   Catch::Contains("adapter_model.safetensors: " + head_copy + ": differs from the base's"));
  write_peft_adapter(llama_adapter, scratch.path / "copy", llama.string());
  NamedTensors with_copy = load_safetensors((scratch.path / "copy" / "adapter_model.safetensors").string());
  with_copy.emplace_back(head_copy, base_weights(llama).at("head.weight"));
  save_safetensors((scratch.path / "copy" / "adapter_model.safetensors").string(), with_copy);
  import_into(scratch.path / "copy", llama, scratch.path / "copied");
  CATCH_CHECK(fs::exists(scratch.path / "copied" / "checkpoints" / "step_00000000" / "adapter.safetensors"));

  // Missing files, bad JSON, a base that is no whole model, no --base.
  const fs::path dir = scratch.path / "files";
  write_peft_adapter(llama_adapter, dir, llama.string());
  fs::rename(dir / "adapter_model.safetensors", dir / "moved");
  CATCH_CHECK_THROWS_WITH(import_into(dir, llama, out),
                          Catch::Contains("adapter_model.safetensors") && Catch::Contains("missing"));
  fs::rename(dir / "moved", dir / "adapter_model.safetensors");
  std::ofstream(dir / "adapter_config.json") << "{\"r\": ";
  CATCH_CHECK_THROWS_WITH(import_into(dir, llama, out),
                          Catch::Contains("adapter_config.json") && Catch::Contains("not valid JSON"));
  fs::remove(dir / "adapter_config.json");
  CATCH_CHECK_THROWS_WITH(import_into(dir, llama, out),
                          Catch::Contains("adapter_config.json") && Catch::Contains("missing"));
  CATCH_CHECK_THROWS_AS(import_into(scratch.path / "nothing", llama, out), ConfigError);
  write_peft_adapter(llama_adapter, scratch.path / "good", llama.string());
  import_into(scratch.path / "good", llama, scratch.path / "adapted");
  CATCH_CHECK_THROWS_WITH(import_into(scratch.path / "good", scratch.path / "adapted", out),
                          Catch::Contains("holds LoRA adapters"));
  CATCH_CHECK_THROWS_AS(import_into(scratch.path / "good", "", out), UsageError);
  // A second import into the same folder: refused, the first left whole.
  CATCH_CHECK_THROWS_AS(import_into(scratch.path / "good", llama, scratch.path / "adapted"), RunFolderError);
  CATCH_CHECK_FALSE(fs::exists(out));
}

// The run an import writes is a run: eval, generate, train --resume (the adapters train, the base stays
// the import's base) and every export take it from the command line.
CATCH_TEST_CASE("peft import: the imported run evaluates, generates, trains on and exports", "[e2e][lora]") {
  const ScratchDir scratch("peft_import_cli");
  std::vector<std::string> docs;
  for (int i = 0; i < 30; ++i)
    docs.push_back("doc " + std::to_string(i * 13 % 17) + " says hi " + std::to_string(i));
  write_byte_docs((scratch.path / "train.tok").string(), docs);
  write_byte_docs((scratch.path / "val.tok").string(), {docs.begin(), docs.begin() + 6});
  const ModelConfig m = lora_llama_model();
  const fs::path base =
      base_run(scratch.path / "base", m, 11,
               {"data.train=" + (scratch.path / "train.tok").string(),
                "data.val=" + (scratch.path / "val.tok").string(), "train.batch_size=4", "threads=1"});
  torch::manual_seed(12);
  const LoraAdapter adapter = random_lora_adapter(
      m, base_weights(base), {"attn.q_proj.weight", "ffn.down_proj.weight"}, 4, 8.0, false);
  write_peft_adapter(adapter, scratch.path / "peft", base.string());
  const fs::path run = scratch.path / "new";
  const auto ok = [](const std::string& args) {
    const Result r = run_causal(args);
    CATCH_INFO(args << "\n" << r.err);
    CATCH_CHECK(r.code == 0);
    return r;
  };
  const Result refused = run_causal("import --format hf --base " + base.string() + " --input x --out " +
                                    (scratch.path / "x").string());
  CATCH_CHECK(refused.code == 2);
  CATCH_CHECK_THAT(refused.err, Catch::Contains("--format peft"));
  ok("import --format peft --input " + (scratch.path / "peft").string() + " --base " + base.string() +
     " --out " + run.string());
  ok("eval --run " + run.string());
  ok("generate --run " + run.string() + " --prompt doc --max-new-tokens 4 --temperature 0");
  ok("train --run-dir " + run.string() + " --resume auto --set train.steps=3");
  const CheckpointInfo trained = read_checkpoint(find_checkpoint(run, ""));
  CATCH_CHECK(trained.state.step == 3);
  CATCH_REQUIRE(trained.state.base.has_value());
  CATCH_CHECK(trained.state.base->dir == base_of(find_checkpoint(base, ""), std::nullopt).dir);
  const auto step3 = tensors_of(trained.dir / "adapter.safetensors");
  const auto step0 = tensors_of(run / "checkpoints" / "step_00000000" / "adapter.safetensors");
  CATCH_CHECK_FALSE(
      torch::equal(step3.at("blocks.0.attn.q_proj.lora.b"), step0.at("blocks.0.attn.q_proj.lora.b")));
  for (const std::string format : {"peft", "gguf-lora"})
    ok("export --run " + run.string() + " --format " + format + " --out " +
       (scratch.path / ("out-" + format)).string());
  ok("export --run " + run.string() + " --merge --format hf --out " + (scratch.path / "merged").string());
}

// The invariant: an adapter PEFT created on causal's HF export of a base, imported onto that base, gives
// causal's eval the log-probabilities PEFT computes. Not vacuous: A and B are random, and the base alone
// must differ from the adapted model.
CATCH_TEST_CASE("interop: adapters PEFT creates import into causal with PEFT's log-probabilities",
                "[.][interop-peft-import]") {
  const fs::path root = scratch("interop_peft_import");
  fs::create_directories(root);
  if (const std::string skip = adapters_python_skip(root); !skip.empty()) {
    std::cout << skip << "\n";
    return;
  }
  struct Case {
    std::string name;
    ModelConfig model;
    std::string targets;  // PEFT's target_modules
    bool rslora;
    bool dora = false;
  };
  const std::vector<Case> cases = {
      {"llama", lora_llama_model(), "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head", false},
      {"llama-interleaved", lora_llama_model(RopePairing::kInterleaved), "q_proj,k_proj,down_proj", true},
      {"qwen2", lora_qwen2_model(), "q_proj,k_proj,v_proj,up_proj", true},
      // PEFT's dense c_attn adapter (q, k, v sharing A), c_proj in attention and MLP alike, Conv1D weights.
      {"gpt2", small_gpt2_model(259), "c_attn,c_proj,c_fc", false},
      {"gpt2-rslora", small_gpt2_model(259), "c_attn,c_fc", true},
      // DoRA: magnitudes on q/k rows that move between RoPE layouts, biases (qwen2), the head, Conv1D.
      {"llama-dora", lora_llama_model(RopePairing::kInterleaved), "q_proj,k_proj,v_proj,down_proj,lm_head",
       false, true},
      {"qwen2-dora", lora_qwen2_model(), "q_proj,k_proj,o_proj,gate_proj", true, true},
      {"gpt2-dora", small_gpt2_model(259), "c_proj,c_fc", false, true},
  };
  torch::manual_seed(13);
  std::vector<std::vector<int64_t>> seqs;
  for (int s = 0; s < 3; ++s) {
    const at::Tensor ids = torch::randint(0, 259, {16}, torch::kLong);
    seqs.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + 16);
  }
  std::ofstream(root / "tokens.json") << nlohmann::json(seqs).dump();
  for (const Case& c : cases) {
    CATCH_INFO(c.name);
    const fs::path dir = root / c.name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path base = base_run(dir / "base", c.model, 21);
    const Result exported =
        run_causal("export --run " + base.string() + " --format hf --out " + (dir / "base-hf").string());
    CATCH_INFO(exported.err);
    CATCH_REQUIRE(exported.code == 0);
    CATCH_REQUIRE(adapters_python(
                      "peft-create --base " + (dir / "base-hf").string() + " --out " +
                          (dir / "peft").string() + " --targets " + c.targets + " --r 4 --alpha 6" +
                          (c.rslora ? " --rslora" : "") + (c.dora ? " --dora" : "") + " --seed 5 --tokens " +
                          (root / "tokens.json").string() + " --result " + (dir / "peft.json").string(),
                      dir / "peft.log") == 0);
    const Result imported = run_causal("import --format peft --input " + (dir / "peft").string() +
                                       " --base " + base.string() + " --out " + (dir / "new").string());
    CATCH_INFO(imported.err);
    CATCH_REQUIRE(imported.code == 0);
    const nlohmann::json peft = nlohmann::json::parse(slurp(dir / "peft.json"));
    const nlohmann::json causal_logprobs = sequence_logprobs(dir / "new", seqs)["logprobs"];
    const double worst = max_abs_logprob_diff(causal_logprobs, peft["adapted"]);
    const double moved = max_abs_logprob_diff(peft["base"], peft["adapted"]);
    std::cout << "peft import " << c.name << ": causal vs PEFT max |dlogprob| " << worst
              << ", base vs adapted " << moved << "\n";
    CATCH_CHECK(worst <= kLogprobTolerance);
    CATCH_CHECK(moved >= kAppliedAtLeast);
    if (!c.dora) continue;
    // And back out: causal's PEFT export of the imported DoRA adapter in PEFT, and the merged export in
    // transformers, give causal's log-probabilities.
    const fs::path peft_out = dir / "peft-out";
    CATCH_REQUIRE(
        run_causal("export --run " + (dir / "new").string() + " --format peft --out " + peft_out.string())
            .code == 0);
    CATCH_REQUIRE(run_causal("export --run " + (dir / "new").string() + " --merge --format hf --out " +
                             (dir / "merged-hf").string())
                      .code == 0);
    CATCH_REQUIRE(adapters_python("peft --base " + (dir / "base-hf").string() + " --adapter " +
                                      peft_out.string() + " --merged " + (dir / "merged-hf").string() +
                                      " --tokens " + (root / "tokens.json").string() + " --out " +
                                      (dir / "peft-out.json").string(),
                                  dir / "peft-out.log") == 0);
    const nlohmann::json back = nlohmann::json::parse(slurp(dir / "peft-out.json"));
    const double out_worst = max_abs_logprob_diff(causal_logprobs, back["adapted"]);
    const double merged = max_abs_logprob_diff(causal_logprobs, back["merged"]);
    std::cout << "peft import " << c.name << ": causal vs PEFT on causal's export " << out_worst
              << ", vs the merged export " << merged << "\n";
    CATCH_CHECK(out_worst <= kLogprobTolerance);
    CATCH_CHECK(merged <= kLogprobTolerance);
  }
}

}  // namespace peft_import_test
