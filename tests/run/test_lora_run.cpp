// An adapter run end to end: it starts from a full checkpoint (its base), writes adapter checkpoints that
// hold the adapters alone and name the base, resumes bit for bit, and refuses a base that changed.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/forensics_bundle.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "io/gguf_file.h"
#include "io/safetensors.h"
#include "model/lora.h"
#include "review/checkpoint_model.h"
#include "run/train_run.h"
#include "support/byte_docs.h"
#include "support/cli.h"
#include "support/held_weights.h"
#include "support/metrics_rows.h"
#include "support/scratch_dir.h"
#include "train/replay.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

RunConfig lora_text_config(const fs::path& dir, int64_t steps, int64_t rank) {
  std::vector<std::string> docs;
  for (int i = 0; i < 30; ++i)
    docs.push_back("doc " + std::to_string(i * 13 % 17) + " says hello world " + std::to_string(i));
  testing::write_byte_docs((dir / "train.tok").string(), docs);
  testing::write_byte_docs((dir / "val.tok").string(), {docs.begin(), docs.begin() + 6});
  const std::string json =
      R"({"name": "lora-text", "seed": 5, "threads": 1,
    "model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259, "d_model": 32,
              "n_layers": 2, "n_heads": 4, "ffn": "swiglu", "norm": "rmsnorm", "position": "rope",
              "max_seq_len": 32, "bias": false, "tie_embeddings": false},
    "data": {"kind": "text", "train": ")" +
      (dir / "train.tok").string() + R"(", "val": ")" + (dir / "val.tok").string() + R"(", "seq_len": 32},
    "train": {"steps": )" +
      std::to_string(steps) + R"(, "batch_size": 3, "log_every": 1,
              "optimizer": {"lr": 0.01}, "schedule": {"kind": "constant"},
              "lora": {"rank": )" +
      std::to_string(rank) + R"(, "dropout": 0.1, "targets": ["q", "v", "down", "head"]}}})";
  return parse_config_text(json, "lora test config");
}

// lora_text_config's data on a model whose rows are whole blocks of every format (d_model and FFN 256),
// adapters on q, v, down and the head, the chunked loss, and train.lora.base_dtype `dtype`.
RunConfig held_text_config(const fs::path& dir, int64_t steps, int64_t rank, const std::string& dtype) {
  RunConfig c = lora_text_config(dir, steps, rank);
  c.model.d_model = 256;
  c.model.ffn_hidden = 256;
  c.model.n_layers = 1;
  c.train.lora.dropout = 0.0;
  c.train.loss_kernel = LossKernel::kChunked;
  c.train.loss_chunk_rows = 32;
  c.train.checkpoint_every = 4;
  for (const auto& [value, name] : enum_table<BaseDtype>())
    if (rank > 0 && dtype == name) c.train.lora.base_dtype = value;
  return c;
}

TrainOutcome lora_run(const RunConfig& config, const fs::path& dir, const std::string& resume,
                      int64_t stop_at = 0, const std::string& fault = "") {
  TrainRequest request;
  request.start.run_dir = dir.string();
  request.start.resume = resume;
  request.print_table = false;
  request.stop_at_step = stop_at;
  request.inject_fault = fault;
  return train_run(config, request);
}

}  // namespace

CATCH_TEST_CASE("lora run: adapter checkpoints name their base, resume bit for bit, refuse a changed base",
                "[e2e][lora]") {
  const testing::ScratchDir scratch("lora_run");
  const fs::path root = scratch.path;
  lora_run(lora_text_config(root, 6, 0), root / "base", "never");
  const fs::path base = root / "base" / "checkpoints" / "step_00000006";
  CATCH_REQUIRE(fs::exists(base / "model.safetensors"));

  lora_run(lora_text_config(root, 14, 4), root / "straight", (root / "base").string());
  lora_run(lora_text_config(root, 14, 4), root / "stopped", (root / "base").string(), 10);
  lora_run(lora_text_config(root, 14, 4), root / "stopped", "auto");
  const fs::path a = root / "straight" / "checkpoints" / "step_00000014";
  const fs::path b = root / "stopped" / "checkpoints" / "step_00000014";
  // The adapters alone: no model file, a base pointer with the base's digest.
  CATCH_CHECK(!fs::exists(a / "model.safetensors"));
  const CheckpointInfo info = read_checkpoint(a);
  CATCH_REQUIRE(info.state.base.has_value());
  CATCH_CHECK(fs::equivalent(info.state.base->dir, base));
  const NamedTensors adapters = load_safetensors((a / "adapter.safetensors").string());
  CATCH_CHECK(adapters.size() == 2 * (2 * 3 + 1));
  const NamedTensors resumed = load_safetensors((b / "adapter.safetensors").string());
  CATCH_REQUIRE(resumed.size() == adapters.size());
  bool trained = false;
  for (size_t i = 0; i < adapters.size(); ++i) {
    CATCH_CHECK(adapters[i].first == resumed[i].first);
    CATCH_CHECK(torch::equal(adapters[i].second, resumed[i].second));
    trained |= adapters[i].first.find(".lora.b") != std::string::npos &&
               adapters[i].second.abs().max().item<double>() > 0;
  }
  CATCH_CHECK(trained);

  // `causal export` writes the adapters alone in each consumer's format, and refuses what does not fit.
  const auto exported = [&](const std::string& args) {
    return testing::run_causal("export --checkpoint " + a.string() + " " + args);
  };
  const fs::path gguf = root / "adapter.gguf";
  CATCH_REQUIRE(exported("--format gguf-lora --out " + gguf.string()).code == 0);
  const GgufFile file = read_gguf(gguf.string());
  CATCH_REQUIRE(file.find("general.type") != nullptr);
  CATCH_CHECK(*file.find("general.type") == GgufValue::string("adapter"));
  CATCH_CHECK(*file.find("adapter.type") == GgufValue::string("lora"));
  CATCH_CHECK(file.tensors.size() == adapters.size());
  // v's rows are in the same order in both files (only q and k rows move): A and B as trained.
  const GgufTensor* v_b = file.tensor("blk.1.attn_v.weight.lora_b");
  CATCH_REQUIRE(v_b != nullptr);
  for (const auto& [name, tensor] : adapters)
    if (name == "blocks.1.attn.v_proj.lora.b")
      CATCH_CHECK(v_b->data == std::string(static_cast<const char*>(tensor.contiguous().data_ptr()),
                                           tensor.numel() * sizeof(float)));
  CATCH_CHECK(exported("--format peft --out " + (root / "peft").string()).code == 0);
  CATCH_CHECK(fs::exists(root / "peft" / "adapter_config.json"));
  CATCH_CHECK(fs::exists(root / "peft" / "adapter_model.safetensors"));
  const testing::Result whole = exported("--format gguf --out " + (root / "whole.gguf").string());
  CATCH_CHECK(whole.code == 2);
  CATCH_CHECK_THAT(whole.err, Catch::Contains("--merge"));
  CATCH_CHECK(exported("--format peft --merge --out " + (root / "p2").string()).code == 2);
  CATCH_CHECK(exported("--format gguf-lora --dtype f16 --out " + (root / "a2.gguf").string()).code == 2);
  const testing::Result no_adapters = testing::run_causal(
      "export --checkpoint " + base.string() + " --format gguf-lora --out " + (root / "b.gguf").string());
  CATCH_CHECK(no_adapters.code == 2);
  CATCH_CHECK_THAT(no_adapters.err, Catch::Contains("no LoRA adapters"));
  CATCH_CHECK_FALSE(fs::exists(root / "whole.gguf"));
  CATCH_CHECK_FALSE(fs::exists(root / "p2"));
  CATCH_CHECK_FALSE(fs::exists(root / "b.gguf"));

  // The base rewritten under the run (another checkpoint's weights, a valid manifest): refused by name.
  fs::remove_all(root / "base" / "checkpoints" / "step_00000006");
  RunConfig other = lora_text_config(root, 6, 0);
  other.seed = 9;
  lora_run(other, root / "base2", "never");
  fs::copy(root / "base2" / "checkpoints" / "step_00000006", base, fs::copy_options::recursive);
  CATCH_CHECK_THROWS_WITH(lora_run(lora_text_config(root, 16, 4), root / "straight", "auto"),
                          Catch::Contains("has changed since the adapters were trained"));
}

CATCH_TEST_CASE("lora run: a forensics bundle holds the adapters alone, names the base and replays the step",
                "[e2e][lora]") {
  const testing::ScratchDir scratch("lora_forensics");
  const fs::path root = scratch.path;
  lora_run(lora_text_config(root, 4, 0), root / "base", "never");
  const fs::path base = root / "base" / "checkpoints" / checkpoint_name(4);
  std::string message;
  try {
    lora_run(lora_text_config(root, 8, 4), root / "tuned", (root / "base").string(), 0,
             "activation:blocks.0.ffn@7");
  } catch (const NonFiniteError& e) {
    message = e.what();
  }
  CATCH_REQUIRE_THAT(message, Catch::Contains("blocks.0.ffn"));
  const fs::path bundle = root / "tuned" / "forensics" / checkpoint_name(7);
  CATCH_CHECK_FALSE(fs::exists(bundle / "model.safetensors"));
  // The adapters as step 7 started: those of a run on the same base stopped after step 6.
  lora_run(lora_text_config(root, 8, 4), root / "reference", (root / "base").string(), 6);
  const NamedTensors held = load_safetensors((bundle / "adapter.safetensors").string());
  const NamedTensors step2 = load_safetensors(
      (root / "reference" / "checkpoints" / checkpoint_name(6) / "adapter.safetensors").string());
  CATCH_REQUIRE(held.size() == step2.size());
  for (size_t i = 0; i < held.size(); ++i) {
    CATCH_CHECK(held[i].first == step2[i].first);
    CATCH_CHECK(torch::equal(held[i].second, step2[i].second));
  }
  const ForensicsBundle read = read_forensics(bundle);
  CATCH_REQUIRE(read.base.has_value());
  CATCH_CHECK(fs::equivalent(read.base->dir, base));
  const ReplayResult replay = replay_step(bundle);
  CATCH_CHECK_FALSE(replay.outcome.finite);
  CATCH_CHECK_THAT(message, Catch::Contains(replay.outcome.nonfinite_cause));

  // A base changed under the bundle is refused by name, as for a checkpoint.
  fs::remove_all(base);
  CATCH_CHECK_THROWS_WITH(replay_step(bundle), Catch::Contains("is gone"));
}

CATCH_TEST_CASE("lora run: DoRA trains its magnitudes, resumes bit for bit, and exports where they can go",
                "[e2e][lora]") {
  const testing::ScratchDir scratch("lora_dora");
  const fs::path root = scratch.path;
  lora_run(lora_text_config(root, 4, 0), root / "base", "never");
  RunConfig dora = lora_text_config(root, 10, 4);
  dora.train.lora.dora = true;
  lora_run(dora, root / "straight", (root / "base").string());
  lora_run(dora, root / "stopped", (root / "base").string(), 7);
  lora_run(dora, root / "stopped", "auto");
  const fs::path a = root / "straight" / "checkpoints" / checkpoint_name(10);
  const NamedTensors straight = load_safetensors((a / "adapter.safetensors").string());
  const NamedTensors resumed = load_safetensors(
      (root / "stopped" / "checkpoints" / checkpoint_name(10) / "adapter.safetensors").string());
  CATCH_REQUIRE(straight.size() == resumed.size());
  CATCH_CHECK(straight.size() == 3 * (2 * 3 + 1));  // a, b and magnitude of q, v, down (2 blocks) and head
  for (size_t i = 0; i < straight.size(); ++i) {
    CATCH_CHECK(straight[i].first == resumed[i].first);
    CATCH_CHECK(torch::equal(straight[i].second, resumed[i].second));
  }
  // The magnitudes train: q's of block 0 is no longer its base row norms.
  const NamedTensors base =
      load_safetensors((root / "base" / "checkpoints" / checkpoint_name(4) / "model.safetensors").string());
  at::Tensor q_weight, q_magnitude;
  for (const auto& [name, t] : base)
    if (name == "blocks.0.attn.q_proj.weight") q_weight = t;
  for (const auto& [name, t] : straight)
    if (name == "blocks.0.attn.q_proj.lora.magnitude") q_magnitude = t;
  CATCH_REQUIRE(q_weight.defined());
  CATCH_CHECK_FALSE(torch::allclose(q_magnitude, q_weight.norm(2, {1})));

  const auto exported = [&](const std::string& args) {
    return testing::run_causal("export --checkpoint " + a.string() + " " + args);
  };
  const testing::Result gguf = exported("--format gguf-lora --out " + (root / "a.gguf").string());
  CATCH_CHECK(gguf.code == 2);
  CATCH_CHECK_THAT(gguf.err, Catch::Contains("DoRA") && Catch::Contains("--merge"));
  CATCH_CHECK_FALSE(fs::exists(root / "a.gguf"));
  CATCH_CHECK(exported("--format peft --out " + (root / "peft").string()).code == 0);
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(root / "peft" / "adapter_config.json"));
  CATCH_CHECK(config.at("use_dora") == true);
  CATCH_CHECK(exported("--merge --format gguf --out " + (root / "merged.gguf").string()).code == 0);
}

// The invariant, for each base dtype: an adapter run over a held base trains (its loss falls), resumes bit
// for bit (the base is held again from the same float32 file the same way), keeps pointing at the same
// float32 base, and evaluates as the plain model over the held values plus the adapters, computed here
// from the base file and the adapter file alone.
CATCH_TEST_CASE("lora run: each train.lora.base_dtype trains, resumes bit for bit, evaluates as its values",
                "[e2e][lora]") {
  const testing::ScratchDir scratch("lora_held");
  const fs::path root = scratch.path;
  lora_run(held_text_config(root, 4, 0, "f32"), root / "base", "never");
  const fs::path base = root / "base" / "checkpoints" / "step_00000004";
  const NamedTensors base_tensors = load_safetensors((base / "model.safetensors").string());
  for (const std::string dtype : {"bf16", "q8_0", "q4_0", "q4_1", "q4_k"}) {
    CATCH_INFO(dtype);
    const fs::path straight = root / ("straight_" + dtype), stopped = root / ("stopped_" + dtype);
    lora_run(held_text_config(root, 12, 4, dtype), straight, base.string());
    lora_run(held_text_config(root, 12, 4, dtype), stopped, base.string(), 8);
    lora_run(held_text_config(root, 12, 4, dtype), stopped, "auto");
    const fs::path a = straight / "checkpoints" / "step_00000012";
    const NamedTensors adapters = load_safetensors((a / "adapter.safetensors").string());
    const NamedTensors resumed =
        load_safetensors((stopped / "checkpoints" / "step_00000012" / "adapter.safetensors").string());
    CATCH_REQUIRE(resumed.size() == adapters.size());
    for (size_t i = 0; i < adapters.size(); ++i)
      CATCH_CHECK(torch::equal(adapters[i].second, resumed[i].second));
    const std::vector<nlohmann::json> rows = testing::metrics_rows(straight, "train");
    CATCH_REQUIRE(rows.size() >= 2);
    CATCH_CHECK(rows.back()["loss"].get<double>() < rows.front()["loss"].get<double>());

    // The same float32 base, by path and digest, unchanged.
    const CheckpointInfo info = read_checkpoint(a);
    CATCH_REQUIRE(info.state.base.has_value());
    CATCH_CHECK(fs::equivalent(info.state.base->dir, base));
    CATCH_CHECK(info.state.base->model_sha256 == base_of(base, std::nullopt).model_sha256);
    CATCH_CHECK(!fs::exists(a / "model.safetensors"));

    // Eval's model against the plain one: each product weight held_values(W) + scale b a.
    CheckpointModel loaded = load_checkpoint_model(straight.string(), "", {});
    CATCH_CHECK(to_string(loaded.config.train.lora.base_dtype) == dtype);
    std::map<std::string, torch::Tensor> lora;
    for (const auto& [name, tensor] : adapters) lora[name] = tensor;
    const auto plain_over = [&](BaseDtype held) {
      RunConfig plain_config = held_text_config(root, 8, 0, "f32");
      resolve(plain_config);
      Transformer plain(plain_config.model);
      torch::NoGradGuard no_grad;
      auto target = plain->named_parameters();
      for (const auto& [name, tensor] : base_tensors) {
        const bool product = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
                             name.rfind("embed.", 0) != 0 && name.find("norm") == std::string::npos;
        torch::Tensor w = product ? testing::held_values(tensor, held) : tensor;
        const std::string path = name.substr(0, name.size() - 7);
        if (product && lora.count(path + ".lora.a"))
          w = w + lora[path + ".lora.b"].mm(lora[path + ".lora.a"]) * (16.0 / 4);
        target[name].copy_(w);
      }
      plain->eval();
      return plain;
    };
    torch::NoGradGuard no_grad;
    ModelInputs in;
    in.tokens = torch::arange(32, torch::kLong).remainder(259).unsqueeze(0);  // (1,32)
    const torch::Tensor got = loaded.model->forward(in).logits;
    const torch::Tensor want = plain_over(loaded.config.train.lora.base_dtype)->forward(in).logits;
    const torch::Tensor unheld = plain_over(BaseDtype::kF32)->forward(in).logits;
    const double error = (got - want).abs().max().item<double>(), scale = want.abs().max().item<double>();
    CATCH_CHECK(error < 1e-5 * scale);
    // Not vacuous: the float32 base's logits are far from the held base's.
    CATCH_CHECK((unheld - want).abs().max().item<double>() > 10 * error);
    CATCH_CHECK((unheld - want).abs().max().item<double>() > 1e-4 * scale);
  }
}
