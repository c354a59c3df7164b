// An adapter run end to end: it starts from a full checkpoint (its base), writes adapter checkpoints that
// hold the adapters alone and name the base, resumes bit for bit, and refuses a base that changed; eval,
// generate and the report switch adapters off or between runs tuned on the same base (--adapter).
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

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
#include "support/html_checks.h"
#include "support/metrics_rows.h"
#include "support/scratch_dir.h"
#include "train/replay.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

RunConfig lora_text_config(const fs::path& dir, int64_t steps, int64_t rank, int64_t max_seq_len = 32) {
  std::vector<std::string> docs;
  for (int i = 0; i < 30; ++i)
    docs.push_back("doc " + std::to_string(i * 13 % 17) + " says hello world " + std::to_string(i));
  testing::write_byte_docs((dir / "train.tok").string(), docs);
  testing::write_byte_docs((dir / "val.tok").string(), {docs.begin(), docs.begin() + 6});
  const std::string json =
      R"({"name": "lora-text", "seed": 5, "threads": 1,
    "model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259, "d_model": 32,
              "n_layers": 2, "n_heads": 4, "ffn": "swiglu", "norm": "rmsnorm", "position": "rope",
              "max_seq_len": )" +
      std::to_string(max_seq_len) + R"(, "bias": false, "tie_embeddings": false},
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

// The invariants under bf16 autocast with gradient accumulation: the frozen base's bfloat16 weight shadows
// (made once: the base never changes) give the adapters the bits that casting the weights in every forward
// gives, through both loss kernels and a head adapter folded into the chunked loss; the run resumes bit for
// bit across a stop between accumulated steps' checkpoints; a base held in bf16 trains under autocast too.
CATCH_TEST_CASE("lora run: bf16 autocast with gradient accumulation: shadows change no bit, resume is exact",
                "[e2e][lora]") {
  const testing::ScratchDir scratch("lora_autocast");
  const fs::path root = scratch.path;
  lora_run(lora_text_config(root, 4, 0), root / "base", "never");
  const fs::path base = root / "base" / "checkpoints" / "step_00000004";
  const auto config = [&](const std::string& kernel, WeightShadows shadows, BaseDtype held) {
    RunConfig c = lora_text_config(root, 12, 4);
    c.model.autocast = AutocastKind::kBf16;
    c.model.weight_shadows = shadows;
    c.train.grad_accum = 2;
    c.train.checkpoint_every = 4;
    c.train.loss_kernel = kernel == "chunked" ? LossKernel::kChunked : LossKernel::kLogits;
    c.train.loss_chunk_rows = 16;
    c.train.lora.dropout = 0.0;  // the chunked loss folds the head's adapter only without dropout
    c.train.lora.base_dtype = held;
    return c;
  };
  const auto adapters_of = [](const fs::path& run) {
    return load_safetensors((run / "checkpoints" / "step_00000012" / "adapter.safetensors").string());
  };
  const auto same = [](const NamedTensors& a, const NamedTensors& b) {
    CATCH_REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CATCH_INFO(a[i].first);
      CATCH_CHECK(a[i].first == b[i].first);
      CATCH_CHECK(torch::equal(a[i].second, b[i].second));
    }
  };
  for (const std::string kernel : {"logits", "chunked"}) {
    CATCH_INFO(kernel);
    const fs::path on = root / ("on_" + kernel), off = root / ("off_" + kernel),
                   stopped = root / ("stop_" + kernel);
    lora_run(config(kernel, WeightShadows::kOn, BaseDtype::kF32), on, base.string());
    lora_run(config(kernel, WeightShadows::kOff, BaseDtype::kF32), off, base.string());
    lora_run(config(kernel, WeightShadows::kOn, BaseDtype::kF32), stopped, base.string(), 8);
    lora_run(config(kernel, WeightShadows::kOn, BaseDtype::kF32), stopped, "auto");
    same(adapters_of(on), adapters_of(off));
    same(adapters_of(on), adapters_of(stopped));
    const std::vector<nlohmann::json> rows = testing::metrics_rows(on, "train");
    CATCH_REQUIRE(rows.size() == 8);
    CATCH_CHECK(rows.back()["loss"].get<double>() < rows.front()["loss"].get<double>());
    bool trained = false;
    for (const auto& [name, tensor] : adapters_of(on))
      trained |= name.find(".lora.b") != std::string::npos && tensor.abs().max().item<double>() > 0;
    CATCH_CHECK(trained);
  }
  const fs::path held = root / "held_bf16";
  lora_run(config("chunked", WeightShadows::kAuto, BaseDtype::kBf16), held, base.string());
  const std::vector<nlohmann::json> rows = testing::metrics_rows(held, "train");
  CATCH_REQUIRE(rows.size() == 8);
  CATCH_CHECK(rows.back()["loss"].get<double>() < rows.front()["loss"].get<double>());
}

namespace {

// Room for a ChatML prompt of bytes (about 50) and its answer; rope has no position table to train.
constexpr int64_t kChatContext = 96;

// The figures of the one file in `run`/eval that `pick` accepts by name.
nlohmann::json eval_figures(const fs::path& run, const std::function<bool(const std::string&)>& pick) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(run / "eval"))
    if (pick(entry.path().filename().string())) found.push_back(entry.path());
  CATCH_REQUIRE(found.size() == 1);
  return nlohmann::json::parse(testing::slurp(found.front()));
}

// Every file a folder holds, with its bytes: what a refused command must leave as it was.
std::map<std::string, std::string> folder_bytes(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != ".lock")
      out[entry.path().string()] = testing::slurp(entry.path());
  return out;
}

}  // namespace

CATCH_TEST_CASE("lora adapters switched: eval and generate on the base alone or another run's adapters",
                "[e2e][lora][adapter]") {
  const testing::ScratchDir scratch("lora_switch");
  const fs::path root = scratch.path;
  lora_run(lora_text_config(root, 6, 0, kChatContext), root / "base", "never");
  // Two tunes of the one base, with their own steps, rank, targets and lr (a continued run keeps its seed).
  lora_run(lora_text_config(root, 14, 4, kChatContext), root / "tuneA", (root / "base").string());
  RunConfig b = lora_text_config(root, 12, 2, kChatContext);
  b.train.optimizer.lr = 0.02;
  b.train.lora.targets = {"q", "k", "o", "up"};
  lora_run(b, root / "tuneB", (root / "base").string());
  // A tune of another base (another seed, the same shapes).
  RunConfig other = lora_text_config(root, 6, 0, kChatContext);
  other.seed = 9;
  lora_run(other, root / "base2", "never");
  RunConfig c = lora_text_config(root, 8, 4, kChatContext);
  c.seed = 9;
  lora_run(c, root / "tuneC", (root / "base2").string());
  const std::string base = (root / "base").string(), tune_a = (root / "tuneA").string(),
                    tune_b = (root / "tuneB").string(), tune_c = (root / "tuneC").string();

  // Refusals first, while eval/ exists nowhere: exit 2, one line naming what is wrong, nothing written.
  const auto before = folder_bytes(root);
  const testing::Result mismatch =
      testing::run_causal("eval --run " + base + " --adapter " + tune_a + " --adapter " + tune_c);
  CATCH_CHECK(mismatch.code == 2);
  CATCH_CHECK(testing::line_count(mismatch.err) == 1);
  CATCH_CHECK_THAT(mismatch.err, Catch::Contains("--adapter " + tune_c) &&
                                     Catch::Contains("trained on base") &&
                                     Catch::Contains((root / "base2").string()) &&
                                     Catch::Contains((root / "base").string()) && Catch::Contains("sha256"));
  CATCH_CHECK(mismatch.out.empty());  // tuneA, before it in the list, was not evaluated either
  const testing::Result generate_mismatch =
      testing::run_causal("generate --run " + tune_a + " --adapter " + tune_c + " --prompt doc");
  CATCH_CHECK(generate_mismatch.code == 2);
  CATCH_CHECK_THAT(generate_mismatch.err, Catch::Contains("generate: --adapter"));
  const testing::Result whole = testing::run_causal("eval --run " + tune_a + " --adapter " + base);
  CATCH_CHECK(whole.code == 2);
  CATCH_CHECK_THAT(whole.err, Catch::Contains("is a whole checkpoint"));
  CATCH_CHECK(testing::run_causal("eval --run " + base + " --adapter " + (root / "nowhere").string()).code ==
              2);
  CATCH_CHECK(testing::run_causal("eval --run " + base + " --adapter " + tune_a + " --adapter " + tune_a +
                                  "/checkpoints/step_00000014")
                  .code == 2);  // the same adapters twice
  CATCH_CHECK(folder_bytes(root) == before);

  const auto figures_of = [](const testing::Result& r, const fs::path& run, bool own) {
    CATCH_REQUIRE(r.code == 0);
    return eval_figures(run, [own](const std::string& name) {
      return own ? name == "step_00000006.json" || name == "step_00000014.json" ||
                       name == "step_00000012.json"
                 : name.find(".val-") != std::string::npos;
    });
  };
  // Each run evaluated as it is: the references.
  const nlohmann::json base_figures = figures_of(testing::run_causal("eval --run " + base), base, true);
  const nlohmann::json a_figures = figures_of(testing::run_causal("eval --run " + tune_a), tune_a, true);
  const nlohmann::json b_figures = figures_of(testing::run_causal("eval --run " + tune_b), tune_b, true);
  CATCH_CHECK(base_figures["adapter"].is_null());  // a whole model as it is
  CATCH_CHECK(a_figures["adapter"]["label"] == tune_a + "@step14");
  // Not vacuous: the tunes moved the loss, each its own way.
  CATCH_CHECK(a_figures["loss"] != base_figures["loss"]);
  CATCH_CHECK(b_figures["loss"] != base_figures["loss"]);
  CATCH_CHECK(a_figures["loss"] != b_figures["loss"]);

  // The base alone under a tune's run folder is the base run's figures, bit for bit.
  const nlohmann::json none =
      figures_of(testing::run_causal("eval --run " + tune_a + " --adapter none"), tune_a, false);
  CATCH_CHECK(none["adapter"]["label"] == "none (base)");
  CATCH_CHECK(none["adapter"]["checkpoint"].is_null());
  for (const char* key : {"loss", "perplexity", "bits_per_byte"}) {
    CATCH_INFO(key);
    CATCH_CHECK(none[key] == base_figures[key]);
  }
  // tuneA's adapters on its base, named from the base run and from tuneB: tuneA's figures.
  const nlohmann::json a_on_b =
      figures_of(testing::run_causal("eval --run " + tune_b + " --adapter " + tune_a), tune_b, false);
  CATCH_CHECK(a_on_b["loss"] == a_figures["loss"]);
  CATCH_CHECK(a_on_b["adapter"]["label"] == tune_a + "@step14");

  // Three in one command: one block and one labelled row each, every figure its own run's.
  const testing::Result three = testing::run_causal("eval --run " + base + " --adapter none --adapter " +
                                                    tune_a + " --adapter " + tune_b);
  CATCH_REQUIRE(three.code == 0);
  CATCH_CHECK(testing::count_of(three.out, "written to ") == 3);
  CATCH_REQUIRE(three.out.find("adapters compared") != std::string::npos);
  const std::string compared = three.out.substr(three.out.find("adapters compared"));
  CATCH_CHECK(testing::line_count(compared) == 4);
  CATCH_CHECK_THAT(compared, Catch::Contains("none (base)") && Catch::Contains(tune_a + "@step14") &&
                                 Catch::Contains(tune_b + "@step12"));
  const nlohmann::json none_on_base = figures_of(three, base, true);  // the base's own: its default file
  CATCH_CHECK(none_on_base["loss"] == base_figures["loss"]);
  CATCH_CHECK(none_on_base["adapter"]["label"] == "none (base)");
  for (const auto& [label, reference] :
       {std::pair{tune_a + "@step14", a_figures}, std::pair{tune_b + "@step12", b_figures}}) {
    const std::string wanted = label;  // a lambda may not capture a structured binding (C++17)
    const nlohmann::json got = eval_figures(root / "base", [&](const std::string& name) {
      if (name.find(".val-") == std::string::npos) return false;
      return nlohmann::json::parse(testing::slurp(root / "base" / "eval" / name))["adapter"]["label"] ==
             wanted;
    });
    CATCH_CHECK(got["loss"] == reference["loss"]);
    CATCH_CHECK(got["adapter"]["sha256"] == reference["adapter"]["sha256"]);
    CATCH_CHECK(got["adapter"]["sha256"].get<std::string>().size() == 64);
    CATCH_CHECK_THAT(compared, Catch::Contains(got["adapter"]["sha256"].get<std::string>().substr(0, 12)));
  }

  // generate, greedy: the base alone under tuneA is the base's text; tuneA's adapters on the base are
  // tuneA's text, which is not the base's (else the first check would prove nothing).
  const auto greedy = [](const std::string& args) {
    const testing::Result r = testing::run_causal("generate --temperature 0 --max-new-tokens 24 " + args);
    CATCH_REQUIRE(r.code == 0);
    return r.out;
  };
  const std::string base_text = greedy("--run " + base + " --prompt 'doc 3 says'");
  const std::string a_text = greedy("--run " + tune_a + " --prompt 'doc 3 says'");
  CATCH_CHECK(greedy("--run " + tune_a + " --adapter none --prompt 'doc 3 says'") == base_text);
  CATCH_CHECK(greedy("--run " + base + " --adapter " + tune_a + " --prompt 'doc 3 says'") == a_text);
  CATCH_CHECK(a_text != base_text);
  const std::string base_chat = greedy("--run " + base + " --chat hello");
  CATCH_CHECK(greedy("--run " + tune_b + " --adapter none --chat hello") == base_chat);
  CATCH_CHECK(greedy("--run " + base + " --adapter " + tune_b + " --chat hello") ==
              greedy("--run " + tune_b + " --chat hello"));

  // The report names the adapters behind each figure, on the page and in the text it prints.
  const testing::Result report = testing::run_causal("report --run " + base);
  CATCH_REQUIRE(report.code == 0);
  const std::string html = testing::slurp(root / "base" / "report.html");
  for (const std::string& label : {std::string("none (base)"), tune_a + "@step14", tune_b + "@step12",
                                   a_figures["adapter"]["sha256"].get<std::string>().substr(0, 12)}) {
    CATCH_INFO(label);
    CATCH_CHECK(report.out.find(label) != std::string::npos);
    CATCH_CHECK(html.find(label) != std::string::npos);
  }
  // A LoRA run's own page: its training eval row and its eval record, both its own adapters.
  CATCH_REQUIRE(testing::run_causal("report --run " + tune_a).code == 0);
  const std::string a_html = testing::slurp(root / "tuneA" / "report.html");
  CATCH_CHECK(testing::count_of(a_html, tune_a + "@step14") >= 2);
  CATCH_CHECK_THAT(a_html,
                   Catch::Contains("training eval row") && Catch::Contains("<code>none (base)</code></td>"));
}
