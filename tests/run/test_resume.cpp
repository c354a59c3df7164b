// Bit-exact resume: "N steps straight" equals "k steps, stop, resume, N-k steps" (and a run stopped
// twice) for retrieval and text, dropout on and off: the same per-step losses, gradient norms and eval
// figures in metrics.jsonl, and the same final weights and optimizer state, tensor by tensor.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_dir.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/optim_compat.h"
#include "io/safetensors.h"
#include "run/run_folder.h"
#include "run/train_run.h"
#include "support/byte_docs.h"
#include "support/cli.h"
#include "support/scratch_dir.h"
#include "support/test_device.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

RunConfig retrieval_config(double dropout) {
  return load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json",
                     {"train.steps=24", "train.log_every=1", "train.eval_every=10", "threads=1",
                      "model.dropout=" + std::to_string(dropout)});
}

// A small corpus of varied documents, some longer than a row (split into pieces).
RunConfig text_config(const fs::path& dir, double dropout) {
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i) {
    std::string doc;
    for (int j = 0; j < 3 + (i * 7) % 23; ++j) doc += "word" + std::to_string((i * 31 + j * 17) % 97) + " ";
    docs.push_back(doc);
  }
  testing::write_byte_docs((dir / "train.tok").string(), docs);
  testing::write_byte_docs((dir / "val.tok").string(), {docs.begin(), docs.begin() + 8});
  const std::string json = R"({"name": "resume-text", "seed": 5, "threads": 1,
    "model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259, "d_model": 32,
              "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn": "swiglu", "norm": "rmsnorm",
              "position": "rope", "max_seq_len": 32, "bias": false, "tie_embeddings": true,
              "dropout": )" +
                           std::to_string(dropout) + R"(},
    "data": {"kind": "text", "train": ")" +
                           (dir / "train.tok").string() + R"(", "val": ")" + (dir / "val.tok").string() +
                           R"(", "seq_len": 32},
    "train": {"steps": 16, "batch_size": 3, "grad_accum": 2, "log_every": 1, "eval_every": 5,
              "optimizer": {"lr": 0.003}, "schedule": {"kind": "cosine", "warmup_steps": 3}}})";
  return parse_config_text(json, "text test config");
}

TrainOutcome resumable_run(const RunConfig& config, const fs::path& dir, int64_t stop_at = 0,
                           const std::string& resume = "auto") {
  TrainRequest request;
  request.start.run_dir = dir.string();
  request.print_table = false;
  request.stop_at_step = stop_at;
  request.start.resume = resume;
  return train_run(config, request);
}

// metrics.jsonl without the wall-clock and memory fields, which legitimately differ between processes.
std::vector<nlohmann::json> metrics(const fs::path& dir) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json row = nlohmann::json::parse(line);
    for (const char* clock : {"tokens_per_s", "elapsed", "mfu", "peak_rss_mib"}) row.erase(clock);
    rows.push_back(row);
  }
  return rows;
}

// First difference between two sets of tensors ("" if none), compared by content.
std::string tensor_difference(const fs::path& a, const fs::path& b) {
  const NamedTensors x = load_safetensors(a.string()), y = load_safetensors(b.string());
  if (x.size() != y.size())
    return "tensor count " + std::to_string(x.size()) + " vs " + std::to_string(y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first) return "name " + x[i].first + " vs " + y[i].first;
    if (!torch::equal(x[i].second, y[i].second)) return "values of " + x[i].first;
  }
  return "";
}

std::string first_metrics_difference(const std::vector<nlohmann::json>& a,
                                     const std::vector<nlohmann::json>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) return "row " + std::to_string(i) + ": " + a[i].dump() + " vs " + b[i].dump();
  }
  return a.size() == b.size() ? ""
                              : "row counts " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
}

// Runs `config` straight, then once per schedule of stops (each a list of --stop-at-step values) and
// requires identical metrics and final tensors.
void check_resume_is_exact(const RunConfig& config, const std::vector<std::vector<int64_t>>& schedules,
                           const fs::path& root) {
  const fs::path straight = root / "straight";
  resumable_run(config, straight);
  const std::string last = checkpoint_name(config.train.steps);
  for (const auto& stops : schedules) {
    std::string name = "stopped";
    for (int64_t k : stops) name += "_" + std::to_string(k);
    CATCH_INFO((config.data.kind == DataKind::kText ? "text" : "retrieval"));
    CATCH_INFO("dropout " << config.model.dropout << ", " << name);
    const fs::path dir = root / name;
    for (int64_t k : stops) CATCH_CHECK(resumable_run(config, dir, k).stopped_at_step == k);
    const nlohmann::json results = resumable_run(config, dir).results;
    CATCH_CHECK(results["steps"] == config.train.steps);
    CATCH_CHECK(first_metrics_difference(metrics(straight), metrics(dir)) == "");
    CATCH_CHECK(tensor_difference(straight / "checkpoints" / last / "model.safetensors",
                                  dir / "checkpoints" / last / "model.safetensors") == "");
    CATCH_CHECK(tensor_difference(straight / "checkpoints" / last / "optimizer.safetensors",
                                  dir / "checkpoints" / last / "optimizer.safetensors") == "");
  }
}

}  // namespace

CATCH_TEST_CASE("resume is bit-exact for retrieval runs, dropout off and on", "[e2e][resume]") {
  for (double dropout : {0.0, 0.1}) {
    testing::ScratchDir scratch("resume_retrieval_" + std::to_string(static_cast<int>(dropout * 10)));
    check_resume_is_exact(retrieval_config(dropout), {{1}, {12}, {23}, {8, 16}}, scratch.path);
  }
}

CATCH_TEST_CASE("resume is bit-exact for text runs with accumulation, dropout off and on", "[e2e][resume]") {
  for (double dropout : {0.0, 0.1}) {
    testing::ScratchDir scratch("resume_text_" + std::to_string(static_cast<int>(dropout * 10)));
    check_resume_is_exact(text_config(scratch.path, dropout), {{1}, {7}, {15}, {5, 11}}, scratch.path);
  }
}

CATCH_TEST_CASE("resume is bit-exact for a text run under bf16 autocast", "[e2e][resume][autocast]") {
  testing::ScratchDir scratch("resume_text_bf16");
  RunConfig config = text_config(scratch.path, 0.0);
  config.model.autocast = AutocastKind::kBf16;
  check_resume_is_exact(config, {{7}}, scratch.path);
}

CATCH_TEST_CASE("resume is bit-exact on the test device (CAUSAL_TEST_DEVICE), with dropout and bf16 autocast",
                "[e2e][resume][device]") {
  CAUSAL_SKIP_UNLESS_TEST_DEVICE();  // the tests above are the CPU's
  testing::ScratchDir scratch("resume_device");
  RunConfig retrieval = retrieval_config(0.1);
  retrieval.device = testing::test_device();
  check_resume_is_exact(retrieval, {{12}}, scratch.path / "retrieval");
  RunConfig text = text_config(scratch.path, 0.1);
  text.device = testing::test_device();
  text.model.autocast = AutocastKind::kBf16;
  check_resume_is_exact(text, {{7}}, scratch.path / "text");
}

CATCH_TEST_CASE("resume refuses another model or data config, listing every field, before reading tensors",
                "[e2e][resume]") {
  testing::ScratchDir scratch("resume_mismatch");
  const RunConfig config = retrieval_config(0.0);
  const fs::path dir = scratch.path / "run";
  resumable_run(config, dir, 5);
  const auto before = metrics(dir);
  RunConfig other = config;
  apply_override(other, "model.d_model=64");
  apply_override(other, "data.pairs=3");
  resolve(other);
  CATCH_CHECK_THROWS_WITH(resumable_run(other, dir),
                          Catch::Matchers::Contains("model.d_model: checkpoint 32, requested 64") &&
                              Catch::Matchers::Contains("data.pairs"));
  CATCH_CHECK(metrics(dir) == before);
  // Changing only how long to train is allowed and continues the run.
  RunConfig longer = config;
  apply_override(longer, "train.steps=30");
  CATCH_CHECK(resumable_run(longer, dir).results["steps"] == 30);
}

CATCH_TEST_CASE("resume PATH forks into a new folder and never overwrites newer checkpoints",
                "[e2e][resume]") {
  testing::ScratchDir scratch("resume_fork");
  const RunConfig config = retrieval_config(0.1);
  const fs::path a = scratch.path / "a", b = scratch.path / "b";
  resumable_run(config, a, 6);
  resumable_run(config, a, 12);
  const fs::path early = a / "checkpoints" / checkpoint_name(6);
  // Continuing a's step-6 checkpoint inside a would write over its step-12 future.
  CATCH_CHECK_THROWS_AS(resumable_run(config, fs::path(), 0, early.string()), CheckpointError);
  resumable_run(config, b, 0, early.string());
  resumable_run(config, a);
  CATCH_CHECK(first_metrics_difference(metrics(a), metrics(b)).find("row 0") == 0);  // b starts at step 7
  const std::string last = checkpoint_name(config.train.steps);
  CATCH_CHECK(tensor_difference(a / "checkpoints" / last / "model.safetensors",
                                b / "checkpoints" / last / "model.safetensors") == "");
}

CATCH_TEST_CASE("checkpoints are pruned to keep_checkpoints and auto continues only unfinished runs",
                "[e2e][resume]") {
  testing::ScratchDir scratch("resume_prune");
  RunConfig config = retrieval_config(0.0);
  apply_override(config, "train.checkpoint_every=4");
  apply_override(config, "train.keep_checkpoints=2");
  TrainRequest request;
  request.start.runs_root = scratch.path.string();
  request.print_table = false;
  request.stop_at_step = 10;
  CATCH_CHECK(train_run(config, request).run_dir == (scratch.path / config.name).string());
  request.stop_at_step = 0;
  const TrainOutcome finished = train_run(config, request);  // auto: the unfinished run of that name
  CATCH_CHECK(finished.run_dir == (scratch.path / config.name).string());
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(scratch.path / config.name / "checkpoints"))
    kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  CATCH_CHECK(kept == std::vector<std::string>{"LATEST", checkpoint_name(20), checkpoint_name(24)});
  // A finished run is kept as it is; the next one gets a folder of its own.
  CATCH_CHECK(train_run(config, request).run_dir == (scratch.path / (config.name + "-2")).string());
}

// Without --run-dir, runs/<name> holding this run stopped before its first checkpoint (its config.json,
// no checkpoint) or even before its config.json (only what RunFolder::create makes) restarts in place: a
// requeue loop must not leave runs/<name>-2, -3, ... behind.
CATCH_TEST_CASE("auto restarts runs/<name> in place when it was killed before its first checkpoint",
                "[e2e][resume]") {
  testing::ScratchDir scratch("resume_named_restart");
  RunConfig config = retrieval_config(0.0);
  apply_override(config, "train.steps=3");
  const fs::path named = scratch.path / config.name;
  TrainRequest request;
  request.start.runs_root = scratch.path.string();
  request.print_table = false;
  fs::create_directories(named);
  std::ofstream(named / "log.txt") << "killed before config.json\n";
  std::ofstream(named / "metrics.jsonl").close();
  CATCH_CHECK(train_run(config, request).run_dir == named.string());
  fs::remove_all(named / "checkpoints");
  fs::remove(named / "results.json");
  CATCH_CHECK(train_run(config, request).run_dir == named.string());
  CATCH_CHECK(fs::exists(named / "results.json"));
  CATCH_CHECK_FALSE(fs::exists(scratch.path / (config.name + "-2")));
}

CATCH_TEST_CASE("resume with threads 0 keeps the CPU thread split the checkpoint was trained with",
                "[e2e][resume]") {
  testing::ScratchDir scratch("resume_threads");
  RunConfig config = retrieval_config(0.0);
  apply_override(config, "threads=0");  // chosen from this machine's load: it may differ between runs
  const fs::path dir = scratch.path / "run";
  resumable_run(config, dir, 5);
  auto stored_split = [&](int64_t step) {
    return read_checkpoint(dir / "checkpoints" / checkpoint_name(step)).state.threads;
  };
  const std::optional<ThreadSplit> first = stored_split(5);
  CATCH_REQUIRE(first.has_value());
  CATCH_CHECK(first->blas >= 1);
  resumable_run(config, dir);
  CATCH_CHECK(stored_split(config.train.steps) == first);
  CATCH_CHECK_THAT(testing::slurp(dir / "log.txt"),
                   Catch::Matchers::Contains(first->describe() + " (as the checkpoint was trained)"));
}

CATCH_TEST_CASE("resume with optimizer kernel auto keeps the AdamW kernel the checkpoint recorded",
                "[e2e][resume]") {
  testing::ScratchDir scratch("resume_optimizer_kernel");
  const auto recorded = [&](const fs::path& dir, int64_t step) {
    return read_checkpoint(dir / "checkpoints" / checkpoint_name(step)).state.optimizer_kernel;
  };
  RunConfig fresh = retrieval_config(0.0);
  fresh.train.steps = 4;
  resumable_run(fresh, scratch.path / "fresh");  // "auto": the fused kernel wherever LibTorch has it
  CATCH_CHECK(recorded(scratch.path / "fresh", 4) == std::string(kHasFusedAdamW ? "fused" : "separate"));

  RunConfig separate = retrieval_config(0.0);
  apply_override(separate, "train.optimizer.kernel=separate");
  RunConfig automatic = retrieval_config(0.0);
  const fs::path straight = scratch.path / "straight", resumed = scratch.path / "resumed";
  resumable_run(separate, straight);
  resumable_run(separate, resumed, 12);
  CATCH_CHECK(recorded(resumed, 12) == std::string("separate"));
  resumable_run(automatic, resumed);
  const std::string last = checkpoint_name(separate.train.steps);
  CATCH_CHECK(recorded(resumed, separate.train.steps) == std::string("separate"));
  CATCH_CHECK(first_metrics_difference(metrics(straight), metrics(resumed)) == "");
  CATCH_CHECK(tensor_difference(straight / "checkpoints" / last / "optimizer.safetensors",
                                resumed / "checkpoints" / last / "optimizer.safetensors") == "");
}
