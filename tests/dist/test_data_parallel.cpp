// Data-parallel training on loopback (127.0.0.1): N ranks x batch b take the same steps as one rank x
// batch N*b; a dead or missing rank ends the job with an error naming it, never a hang; resume is exact
// on the same world size and continues on another; torchrun-style launch by environment variables equals
// `--nproc`. Every run is a real `causal` process (ranks are processes).
#include <fcntl.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "config/config_io.h"
#include "dist/launcher.h"
#include "io/safetensors.h"
#include "support/byte_docs.h"
#include "support/cli.h"
#include "support/metrics_rows.h"
#include "support/scratch_dir.h"
#include "support/tolerance.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string err;
  double seconds = 0.0;
};

// `env` (VAR=value ...) then `causal ARGS`, from the source root; stdout is dropped, stderr kept.
Run causal_run(const std::string& args, const fs::path& scratch, const std::string& name,
               const std::string& env = "") {
  const fs::path err = scratch / (name + ".err");
  const std::string cmd = "cd " + std::string(CAUSAL_SOURCE_DIR) + " && env " + env + " " + CAUSAL_BINARY +
                          " " + args + " >/dev/null 2>" + err.string();
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = testing::slurp(err);
  return r;
}

fs::path write_config(const fs::path& dir, const std::string& name, const std::string& json) {
  const fs::path path = dir / (name + ".json");
  std::ofstream(path) << json;
  return path;
}

// configs/retrieval.json (the lab's reference setting, global batch 64) for 20 steps, a metrics row per
// step and a checkpoint every 10, written out as a config file of its own.
// The lab's ReLU is swapped for GELU: at lr 5e-3 a rounding-level difference flips a ReLU unit on or off for
// some row, a discrete change in its gradient (not a rounding-sized one) that 20 steps grow to ~1e-5 in the
// weights (measured), so a ReLU model can only be compared bit for bit across summation orders.
fs::path retrieval_config(const fs::path& dir) {
  RunConfig config = load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json",
                                 {"train.steps=20", "train.log_every=1", "train.checkpoint_every=10",
                                  "dist.timeout_s=20", "model.ffn=gelu"});
  return write_config(dir, "retrieval", config_to_string(config));
}

// Padded text rows (documents of varied lengths: padding differs per row) with gradient accumulation.
// Byte documents as a token file; with `masked`, the loss mask leaves out the first half of each document's
// labels, as an instruction's prompt.
void write_docs(const fs::path& path, const std::vector<std::string>& docs, bool masked) {
  if (!masked) return testing::write_byte_docs(path.string(), docs);
  ByteTokenizer tok;
  std::vector<int64_t> tokens, starts;
  std::vector<uint8_t> mask;
  for (const std::string& d : docs) {
    starts.push_back(static_cast<int64_t>(tokens.size()));
    tokens.push_back(tok.info().bos_id);
    mask.push_back(0);
    for (size_t i = 0; i < d.size(); ++i) {
      tokens.push_back(static_cast<unsigned char>(d[i]));
      mask.push_back(i >= d.size() / 2 ? 1 : 0);
    }
    tokens.push_back(tok.info().eos_id);
    mask.push_back(1);
  }
  write_token_file(path.string(), tok.info(), tokens, starts, std::nullopt, {}, "", mask);
}

fs::path text_config(const fs::path& dir, int64_t batch, bool masked = false) {
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i) {
    std::string doc;
    for (int j = 0; j < 2 + (i * 7) % 9; ++j) doc += "w" + std::to_string((i * 31 + j * 17) % 97) + " ";
    docs.push_back(doc);
  }
  write_docs(dir / "train.tok", docs, masked);
  write_docs(dir / "val.tok", {docs.begin(), docs.begin() + 8}, masked);
  return write_config(dir, "text",
                      R"({"name": "dp-text", "seed": 5, "threads": 1,
    "model": {"d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn": "swiglu",
              "norm": "rmsnorm", "max_seq_len": 32},
    "data": {"kind": "text", "train": ")" +
                          (dir / "train.tok").string() + R"(", "val": ")" + (dir / "val.tok").string() +
                          R"(", "seq_len": 32, "layout": "padded"},
    "train": {"steps": 20, "batch_size": )" +
                          std::to_string(batch) + R"(, "grad_accum": 2, "log_every": 1,
              "checkpoint_every": 10, "optimizer": {"lr": 0.003}},
    "dist": {"timeout_s": 20}})");
}

// How far two runs of `config` may drift apart when only summation orders differ (another split over ranks,
// another thread count): tolerance.h (4) for a step's gradients and logits, (5) for the weights after it.
struct RunBounds {
  RunConfig config;
  int64_t parameters = 0;
  double gradient_rel = 0.0;  // normwise, of one step's clipped gradients
  double logit_path = 0.0;    // forward_path * eps: a logit's difference per unit of |logit|

  // Largest weight difference after `steps` optimizer steps.
  double weights(int64_t steps) const {
    const OptimizerConfig& o = config.train.optimizer;
    return testing::adamw_weights_bound(gradient_rel, o.lr, steps, o.betas[0], o.betas[1]);
  }
  // A logged step's loss: the forward pass's own difference (at the scale of the step's max_abs_logit, that
  // of its last micro-batch), plus the loss's first-order response to the weights' difference so far (the
  // runs were identical up to step `same_until`), |g . dw| <= |g|_2 sqrt(P) max|dw|.
  double loss(const nlohmann::json& row, int64_t same_until) const {
    const int64_t apart = std::max<int64_t>(0, row["step"].get<int64_t>() - 1 - same_until);  // steps so far
    const double logit_bound = logit_path * row["max_abs_logit"].get<double>();
    return testing::loss_bound(logit_bound, row["loss"].get<double>(), row["valid_tokens"].get<int64_t>()) +
           row["grad_norm"].get<double>() * std::sqrt(static_cast<double>(parameters)) * weights(apart);
  }
};

// `trained` names the checkpoint file of what trains: the whole model, or an adapter run's adapters (the
// parameters whose difference moves the loss).
RunBounds run_bounds(const fs::path& config_file, const fs::path& run,
                     const std::string& trained = "model.safetensors") {
  RunBounds b;
  b.config = load_config(config_file.string());
  const ModelConfig& m = b.config.model;
  const int64_t time = b.config.data.kind == DataKind::kText ? b.config.data.seq_len : m.max_seq_len;
  const int64_t rows = b.config.train.batch_size * b.config.train.grad_accum * time;  // positions per step
  const NamedTensors weights =
      load_safetensors((run / "checkpoints" / checkpoint_name(b.config.train.steps) / trained).string());
  int64_t largest = 0;
  for (const auto& [name, tensor] : weights) {
    b.parameters += tensor.numel();
    largest = std::max<int64_t>(largest, tensor.numel());
  }
  const int64_t positions = m.position == PositionKind::kRope ? time : 0;
  b.gradient_rel =
      static_cast<double>(testing::gradient_path(m, time, time, positions, rows)) * testing::kEps32 +
      (b.config.train.grad_clip > 0 ? testing::clip_rel(largest, static_cast<int64_t>(weights.size())) : 0.0);
  b.logit_path = static_cast<double>(testing::forward_path(m, time, positions)) * testing::kEps32;
  return b;
}

// The per-step losses of `a` (the reference) and `b` within `bounds` (the step counts must match); the runs
// are the same run up to step `same_until`.
void check_losses(const fs::path& a, const fs::path& b, const RunBounds& bounds, int64_t same_until = 0) {
  const auto x = testing::metrics_rows(a, "train"), y = testing::metrics_rows(b, "train");
  CATCH_REQUIRE(x.size() == y.size());
  CATCH_REQUIRE(!x.empty());
  for (size_t i = 0; i < x.size(); ++i) {
    CATCH_REQUIRE(x[i]["step"] == y[i]["step"]);
    CATCH_REQUIRE(x[i]["valid_tokens"] == y[i]["valid_tokens"]);
    CATCH_CHECK(testing::scalars_close(y[i]["loss"].get<double>(), x[i]["loss"].get<double>(),
                                       bounds.loss(x[i], same_until), "loss at step " + x[i]["step"].dump()));
  }
}

// Largest |a - b| over the per-step losses (and the step counts must match).
double loss_difference(const fs::path& a, const fs::path& b) {
  const auto x = testing::metrics_rows(a, "train"), y = testing::metrics_rows(b, "train");
  CATCH_REQUIRE(x.size() == y.size());
  CATCH_REQUIRE(!x.empty());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    CATCH_REQUIRE(x[i]["step"] == y[i]["step"]);
    CATCH_REQUIRE(x[i]["valid_tokens"] == y[i]["valid_tokens"]);
    worst = std::max(worst, std::abs(x[i]["loss"].get<double>() - y[i]["loss"].get<double>()));
  }
  return worst;
}

// The key projection's bias shifts every score of a query by the same amount, which softmax ignores: its
// gradient is exactly zero in exact arithmetic, so what it receives is rounding noise, which AdamW
// normalises into steps of about lr. Any change in summation order (a split over ranks, another thread
// count) changes that noise, so the tensor can only be compared bit for bit, never to a tolerance.
bool noise_driven(const std::string& name) {
  return name.size() >= 16 && name.compare(name.size() - 16, 16, "attn.k_proj.bias") == 0;
}

// Largest |a - b| over the weights of the two runs' checkpoints after `step`; with `tolerant`, the
// noise-driven tensors are left out (they are compared exactly when `tolerant` is false).
double weight_difference(const fs::path& a, const fs::path& b, int64_t step = 20, bool tolerant = false,
                         const std::string& file = "model.safetensors") {
  const std::string name = checkpoint_name(step);
  const NamedTensors x = load_safetensors((a / "checkpoints" / name / file).string());
  const NamedTensors y = load_safetensors((b / "checkpoints" / name / file).string());
  CATCH_REQUIRE(x.size() == y.size());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    CATCH_REQUIRE(x[i].first == y[i].first);
    if (tolerant && noise_driven(x[i].first)) continue;
    worst = std::max(worst, (x[i].second - y[i].second).abs().max().item<double>());
  }
  return worst;
}

// Under the numerics matrix every run takes CAUSAL_TEST_THREADS threads.
std::string train_args(const fs::path& config, const fs::path& run, const std::string& extra = "") {
  return "train --config " + config.string() + " --run-dir " + run.string() + " " + extra +
         testing::threads_override();
}

void check_two_ranks_equal_one(const fs::path& config, const fs::path& root,
                               const std::string& two_extra = "") {
  const Run one = causal_run(train_args(config, root / "one"), root, "one");
  CATCH_REQUIRE(one.code == 0);
  const Run two = causal_run(train_args(config, root / "two", "--nproc 2 " + two_extra), root, "two");
  CATCH_INFO(two.err);
  CATCH_REQUIRE(two.code == 0);
  // Guards against comparing a run with itself: rank 0 wrote a two-rank run.
  CATCH_REQUIRE(testing::metrics_rows(root / "two", "train").front()["world_size"] == 2);
  const RunBounds bounds = run_bounds(config, root / "one");
  const double weights = weight_difference(root / "one", root / "two", 20, /*tolerant=*/true);
  std::printf("2 ranks vs 1 (%s): max |loss diff| %.3g, max |weight diff| %.3g (bound %.3g)\n",
              config.filename().c_str(), loss_difference(root / "one", root / "two"), weights,
              bounds.weights(20));
  check_losses(root / "one", root / "two", bounds);
  CATCH_CHECK(testing::scalars_close(weights, 0.0, bounds.weights(20), "weights after 20 steps"));
}

}  // namespace

CATCH_TEST_CASE("2 ranks x batch b equal 1 rank x batch 2b on retrieval (losses, weights to rounding)",
                "[e2e][dist][numerics]") {
  testing::ScratchDir scratch("dp_equal_retrieval");
  check_two_ranks_equal_one(retrieval_config(scratch.path), scratch.path);
}

CATCH_TEST_CASE("2 ranks x batch b equal 1 rank x batch 2b on padded text with accumulation",
                "[e2e][dist][numerics]") {
  testing::ScratchDir scratch("dp_equal_text");
  // Buckets of 10 KB: many of them, started one by one from the gradient hooks while backward runs.
  check_two_ranks_equal_one(text_config(scratch.path, 4), scratch.path, "--set dist.bucket_mb=0.01");
  const std::string log = testing::slurp(scratch.path / "two" / "log.txt");
  const size_t at = log.find(" gradient buckets");
  CATCH_REQUIRE(at != std::string::npos);
  const size_t count = log.rfind(' ', at - 1) + 1;
  CATCH_CHECK(std::stoi(log.substr(count, at - count)) > 1);
}

// An adapter run on 2 ranks over the 1-rank base: every rank holds the same frozen base, only the adapters'
// gradients are all-reduced (the log counts exactly their values), and the adapters take the steps of one
// rank with the whole batch (losses, adapters to rounding, by the same bounds over what trains).
CATCH_TEST_CASE("2 ranks x batch b equal 1 rank x batch 2b on LoRA adapters over a frozen base",
                "[e2e][dist][numerics]") {
  testing::ScratchDir scratch("dp_equal_lora");
  const fs::path root = scratch.path;
  const fs::path base_config = text_config(root, 4);
  const Run base = causal_run(train_args(base_config, root / "base"), root, "base");
  CATCH_INFO(base.err);
  CATCH_REQUIRE(base.code == 0);
  RunConfig lora = load_config(base_config.string());
  lora.train.steps = 40;
  lora.train.optimizer.lr = 0.01;
  lora.train.lora.rank = 4;
  lora.train.lora.alpha = 8.0;
  lora.train.lora.targets = {"q", "v", "down"};
  const fs::path config = write_config(root, "lora", config_to_string(lora));
  const std::string from = "--resume " + (root / "base").string() + " ";
  const Run one = causal_run(train_args(config, root / "one", from), root, "one");
  CATCH_INFO(one.err);
  CATCH_REQUIRE(one.code == 0);
  const Run two = causal_run(train_args(config, root / "two", from + "--nproc 2"), root, "two");
  CATCH_INFO(two.err);
  CATCH_REQUIRE(two.code == 0);
  CATCH_REQUIRE(testing::metrics_rows(root / "two", "train").front()["world_size"] == 2);

  const fs::path last = root / "two" / "checkpoints" / checkpoint_name(40);
  CATCH_REQUIRE_FALSE(fs::exists(last / "model.safetensors"));
  int64_t adapter_values = 0;
  for (const auto& [name, tensor] : load_safetensors((last / "adapter.safetensors").string())) {
    CATCH_CHECK(name.find(".lora.") != std::string::npos);
    adapter_values += tensor.numel();
  }
  // q (32 -> 32), v (32 -> 16) and down (hidden -> 32) of 2 layers, r 4: more than q and v alone.
  CATCH_CHECK(adapter_values > 2 * 4 * ((32 + 32) + (32 + 16)));
  CATCH_CHECK_THAT(testing::slurp(root / "two" / "log.txt"),
                   Catch::Contains("of " + std::to_string(adapter_values) + " values in all"));

  const RunBounds bounds = run_bounds(config, root / "one", "adapter.safetensors");
  const double adapters =
      weight_difference(root / "one", root / "two", 40, /*tolerant=*/false, "adapter.safetensors");
  std::printf("LoRA, 2 ranks vs 1: max |loss diff| %.3g, max |adapter diff| %.3g (bound %.3g)\n",
              loss_difference(root / "one", root / "two"), adapters, bounds.weights(20));
  check_losses(root / "one", root / "two", bounds, /*same_until=*/20);
  CATCH_CHECK(testing::scalars_close(adapters, 0.0, bounds.weights(20), "adapters after 20 steps"));
}

// Ranks split rows, and the rows carry their loss mask: the global valid-token count of every step is the
// single rank's, and so are the losses and weights.
CATCH_TEST_CASE("2 ranks x batch b equal 1 rank x batch 2b on text with a loss mask",
                "[e2e][dist][numerics]") {
  testing::ScratchDir scratch("dp_equal_masked");
  check_two_ranks_equal_one(text_config(scratch.path, 4, /*masked=*/true), scratch.path);
  CATCH_CHECK(TokenFile((scratch.path / "train.tok").string()).header().loss_mask);
}

CATCH_TEST_CASE("a 2-rank run resumes bit-exactly on 2 ranks and continues on 1", "[e2e][dist][numerics]") {
  testing::ScratchDir scratch("dp_resume");
  const fs::path config = retrieval_config(scratch.path);
  CATCH_REQUIRE(
      causal_run(train_args(config, scratch.path / "straight", "--nproc 2"), scratch.path, "s").code == 0);
  const fs::path stopped = scratch.path / "stopped";
  CATCH_REQUIRE(
      causal_run(train_args(config, stopped, "--nproc 2 --stop-at-step 10"), scratch.path, "a").code == 0);
  CATCH_REQUIRE(testing::metrics_rows(stopped, "train").size() == 10);
  // A copy of the stopped run continues on one rank.
  fs::copy(stopped, scratch.path / "on_one", fs::copy_options::recursive);
  CATCH_REQUIRE(causal_run(train_args(config, stopped, "--nproc 2"), scratch.path, "b").code == 0);
  CATCH_CHECK(loss_difference(scratch.path / "straight", stopped) == 0.0);
  CATCH_CHECK(weight_difference(scratch.path / "straight", stopped) == 0.0);

  const Run one = causal_run(train_args(config, scratch.path / "on_one"), scratch.path, "c");
  CATCH_REQUIRE(one.code == 0);
  CATCH_CHECK(testing::slurp(scratch.path / "on_one" / "log.txt")
                  .find("resuming on 1 ranks a checkpoint written by 2") != std::string::npos);
  // The same global batches in the same order: only the summation order differs from the 2-rank run, for
  // the 10 steps after the resume (tolerance.h (5)).
  const RunBounds bounds = run_bounds(config, scratch.path / "straight");
  check_losses(scratch.path / "straight", scratch.path / "on_one", bounds, 10);
  CATCH_CHECK(testing::scalars_close(
      weight_difference(scratch.path / "straight", scratch.path / "on_one", 20, /*tolerant=*/true), 0.0,
      bounds.weights(10), "weights 10 steps after the resume"));
}

CATCH_TEST_CASE("torchrun-style launch by environment variables equals --nproc 2", "[e2e][dist]") {
  testing::ScratchDir scratch("dp_env");
  const fs::path config = retrieval_config(scratch.path);
  CATCH_REQUIRE(causal_run(train_args(config, scratch.path / "nproc", "--nproc 2"), scratch.path, "n").code ==
                0);
  const std::string common = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                             std::to_string(free_loopback_port());
  const fs::path run = scratch.path / "env";
  // Two processes started here, as torchrun or a cluster scheduler would start them.
  const std::string both =
      "sh -c '" + std::string("cd ") + CAUSAL_SOURCE_DIR + " && (env RANK=0 LOCAL_RANK=0 " + common + " " +
      CAUSAL_BINARY + " " + train_args(config, run) + " >/dev/null 2>" + (scratch.path / "r0.err").string() +
      " & a=$!; env RANK=1 LOCAL_RANK=1 " + common + " " + CAUSAL_BINARY + " " + train_args(config, run) +
      " >/dev/null 2>" + (scratch.path / "r1.err").string() + "; b=$?; wait $a; exit $(( $? | b )))'";
  const int status = std::system(both.c_str());
  CATCH_INFO(testing::slurp(scratch.path / "r0.err") << testing::slurp(scratch.path / "r1.err"));
  CATCH_REQUIRE(WIFEXITED(status));
  CATCH_REQUIRE(WEXITSTATUS(status) == 0);
  CATCH_CHECK(loss_difference(scratch.path / "nproc", run) == 0.0);
  CATCH_CHECK(weight_difference(scratch.path / "nproc", run) == 0.0);
}

CATCH_TEST_CASE("a rank that never joins makes the others time out with exit 6 and no run folder",
                "[e2e][dist]") {
  testing::ScratchDir scratch("dp_never_joins");
  const fs::path config = retrieval_config(scratch.path);
  const Run r = causal_run(
      train_args(config, scratch.path / "run", "--set dist.timeout_s=2"), scratch.path, "r",
      "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_loopback_port()));
  CATCH_INFO(r.err);
  CATCH_CHECK(r.code == kExitDist);
  CATCH_CHECK(r.err.find("joining the process group") != std::string::npos);
  CATCH_CHECK(r.seconds < 20.0);
  CATCH_CHECK(!fs::exists(scratch.path / "run"));
}

CATCH_TEST_CASE("a worker killed with SIGKILL fails --nproc 2 within the timeout, naming the rank",
                "[e2e][dist]") {
  testing::ScratchDir scratch("dp_sigkill");
  const fs::path config = retrieval_config(scratch.path);
  const fs::path run = scratch.path / "run";
  // Many steps, so the job is still training when rank 1 is killed.
  std::vector<std::string> args = {
      CAUSAL_BINARY, "train", "--config", config.string(),      "--run-dir", run.string(),
      "--nproc",     "2",     "--set",    "train.steps=100000", "--set",     "dist.timeout_s=5"};
  const fs::path err = scratch.path / "launcher.err";
  const pid_t launcher = ::fork();
  CATCH_REQUIRE(launcher >= 0);
  if (launcher == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDERR_FILENO);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::execv(CAUSAL_BINARY, argv.data());
    ::_exit(127);
  }
  // Wait until training runs (metrics rows appear), then kill the worker whose environment says RANK=1.
  for (int i = 0; i < 600 && testing::metrics_rows(run, "train").size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CATCH_REQUIRE(testing::metrics_rows(run, "train").size() >= 3);
  int victim = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = testing::slurp(entry.path() / "stat");
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    char state = 0;
    int parent = 0;
    fields >> state >> parent;
    if (parent != launcher) continue;
    std::string env = testing::slurp(entry.path() / "environ");
    if (("\0" + env).find(std::string("\0RANK=1\0", 8)) != std::string::npos) victim = std::stoi(name);
  }
  CATCH_REQUIRE(victim > 0);
  const auto killed = std::chrono::steady_clock::now();
  ::kill(victim, SIGKILL);
  // The launcher must end on its own, well within the timeout plus the grace period.
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 300 && !ended; ++i) {
    ended = ::waitpid(launcher, &status, WNOHANG) == launcher;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  if (!ended) {
    ::kill(launcher, SIGKILL);
    ::waitpid(launcher, &status, 0);
  }
  CATCH_REQUIRE(ended);
  CATCH_CHECK(seconds < 15.0);
  CATCH_CHECK(WIFEXITED(status));
  CATCH_CHECK(WEXITSTATUS(status) == 128 + SIGKILL);
  const std::string text = testing::slurp(err);
  CATCH_INFO(text);
  CATCH_CHECK(text.find("rank 1 was killed by signal 9") != std::string::npos);
}

CATCH_TEST_CASE("a non-finite step stops every rank together, naming the rank it came from", "[e2e][dist]") {
  testing::ScratchDir scratch("dp_nonfinite");
  const fs::path config = retrieval_config(scratch.path);
  const Run r =
      causal_run(train_args(config, scratch.path / "run", "--nproc 2 --inject-fault activation:logits@3"),
                 scratch.path, "r");
  CATCH_INFO(r.err);
  CATCH_CHECK(r.code == kExitNumerical);
  // Both ranks reached the same verdict at the same step, with rank 0's own diagnosis.
  for (const char* rank : {"[rank 0] causal: error: step 3:", "[rank 1] causal: error: step 3:"})
    CATCH_CHECK(r.err.find(rank) != std::string::npos);
  CATCH_CHECK(r.err.find("on rank 0: first non-finite activation in forward order: logits") !=
              std::string::npos);
  CATCH_CHECK(fs::exists(scratch.path / "run" / "forensics" / "step_00000003"));
}
