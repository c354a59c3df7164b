// Checkpoints through the command line: SIGINT/SIGTERM save and exit 130/143, damaged checkpoints exit 4,
// `eval` writes its figures, `generate --verify-cache` matches the full pass.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "checkpoint/checkpoint_dir.h"
#include "support/byte_docs.h"
#include "support/cli.h"

extern char** environ;

using namespace causal::testing;
namespace fs = std::filesystem;

namespace {

// Starts `causal train` on the retrieval config in the background; returns its pid.
pid_t start_training(const fs::path& dir, const std::string& extra) {
  const std::string cmd = std::string("cd ") + CAUSAL_SOURCE_DIR + " && exec " + CAUSAL_BINARY +
                          " train --config configs/retrieval.json --set train.steps=1000000 --set "
                          "train.log_every=1 --run-dir " +
                          dir.string() + " " + extra + " >" + (dir.string() + ".out") + " 2>" +
                          (dir.string() + ".err");
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  CATCH_REQUIRE(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
  return pid;
}

// Waits until metrics.jsonl holds `rows` lines (the run is in its loop), at most 60 s.
bool wait_for_rows(const fs::path& dir, int rows) {
  for (int i = 0; i < 3000; ++i) {
    if (line_count(slurp(dir / "metrics.jsonl")) >= rows) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int64_t last_logged_step(const fs::path& dir) {
  std::ifstream in(dir / "metrics.jsonl");
  int64_t step = 0;
  for (std::string line; std::getline(in, line);) step = nlohmann::json::parse(line)["step"].get<int64_t>();
  return step;
}

// `causal train` on the bundled retrieval config for `steps` steps into `dir`.
Result train_retrieval(const fs::path& dir, int steps) {
  return run_causal("train --config configs/retrieval.json --set train.steps=" + std::to_string(steps) +
                    " --run-dir " + dir.string());
}

// A tiny text run: token files and a config file in `dir`, trained for `steps` with checkpoints.
fs::path train_text_run(const fs::path& dir, int steps) {
  fs::create_directories(dir);
  std::vector<std::string> docs;
  for (int i = 0; i < 30; ++i) docs.push_back("the cat " + std::to_string(i) + " sat on the mat. ");
  write_byte_docs((dir / "train.tok").string(), docs);
  write_byte_docs((dir / "val.tok").string(), {docs.begin(), docs.begin() + 5});
  std::ofstream(dir / "text.json") << R"({"name": "cli-text", "threads": 1,
    "model": {"inputs": [{"name": "token", "vocab": 259}], "output_vocab": 259, "d_model": 32, "n_layers": 2,
              "n_heads": 4, "n_kv_heads": 2, "position": "rope", "max_seq_len": 24, "ffn": "swiglu",
              "norm": "rmsnorm", "bias": false, "tie_embeddings": true},
    "data": {"kind": "text", "train": ")" +
                                          (dir / "train.tok").string() + R"(", "val": ")" +
                                          (dir / "val.tok").string() + R"(", "seq_len": 24},
    "train": {"steps": )" + std::to_string(steps) +
                                          R"(, "batch_size": 4, "log_every": 1,
              "checkpoint_every": 2, "optimizer": {"lr": 0.01}}})";
  const Result r =
      run_causal("train --config " + (dir / "text.json").string() + " --run-dir " + (dir / "run").string());
  CATCH_REQUIRE(r.code == 0);
  return dir / "run";
}

}  // namespace

CATCH_TEST_CASE("SIGTERM and SIGINT finish the step, save a checkpoint and exit 143 and 130",
                "[e2e][cli][resume]") {
  for (const auto& [signal, code] : {std::pair{SIGTERM, 143}, std::pair{SIGINT, 130}}) {
    CATCH_INFO("signal " << signal);
    const fs::path dir = scratch("signal" + std::to_string(signal));
    const pid_t pid = start_training(dir, "");
    CATCH_REQUIRE(wait_for_rows(dir, 5));
    kill(pid, signal);
    CATCH_CHECK(exit_code(pid) == code);
    const int64_t step = last_logged_step(dir);
    CATCH_CHECK(slurp(dir / "checkpoints" / "LATEST") == causal::checkpoint_name(step) + "\n");
    CATCH_CHECK_THAT(slurp(dir.string() + ".err"), Catch::Matchers::Contains("stopped after step"));
    // The same command (with a reachable end) continues from there.
    const Result resumed = run_causal(
        "train --config configs/retrieval.json --set train.log_every=1 --set "
        "train.steps=" +
        std::to_string(step + 3) + " --run-dir " + dir.string());
    CATCH_CHECK(resumed.code == 0);
    CATCH_CHECK_THAT(resumed.err, Catch::Matchers::Contains("resuming from"));
    CATCH_CHECK(last_logged_step(dir) == step + 3);
    fs::remove_all(dir);
  }
}

CATCH_TEST_CASE("a second signal exits at once and the last complete checkpoint stays valid",
                "[e2e][cli][resume]") {
  const fs::path dir = scratch("double_signal");
  // Steps of about a second, so the first signal's graceful stop cannot finish before the second arrives.
  const pid_t pid = start_training(dir, "--set train.checkpoint_every=2 --set train.batch_size=65536");
  CATCH_REQUIRE(wait_for_rows(dir, 3));
  kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // two pending signals would merge into one
  kill(pid, SIGTERM);
  CATCH_CHECK(exit_code(pid) == 143);
  // 143 is also a graceful stop's code: the immediate exit is told apart by its own line and by the
  // absence of the graceful stop's.
  const std::string err = slurp(dir.string() + ".err");
  CATCH_CHECK_THAT(err, Catch::Matchers::Contains("second signal: exiting at once"));
  CATCH_CHECK_THAT(err, !Catch::Matchers::Contains("stopped after step"));
  const auto latest = causal::latest_valid_checkpoint(dir / "checkpoints");
  CATCH_REQUIRE(latest.has_value());
  CATCH_CHECK_NOTHROW(causal::verify_checkpoint(*latest));
  const Result resumed = train_retrieval(dir, 40);
  CATCH_CHECK(resumed.code == 0);
  fs::remove_all(dir);
}

CATCH_TEST_CASE("a damaged checkpoint is refused with exit code 4", "[e2e][cli][resume]") {
  const fs::path dir = scratch("damaged");
  CATCH_REQUIRE(train_retrieval(dir, 4).code == 0);
  const fs::path model = dir / "checkpoints" / causal::checkpoint_name(4) / "model.safetensors";
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const Result eval = run_causal("eval --run " + dir.string());
  CATCH_CHECK(eval.code == 4);
  CATCH_CHECK_THAT(eval.err,
                   Catch::Matchers::Contains("sha256") && Catch::Matchers::Contains("model.safetensors"));
  const Result resume = run_causal("train --config configs/retrieval.json --set train.steps=8 --resume " +
                                   model.parent_path().string());
  CATCH_CHECK(resume.code == 4);
  CATCH_CHECK(line_count(resume.err) == 1);
  fs::remove_all(dir);
}

CATCH_TEST_CASE("eval writes eval/step_N.json for retrieval and text runs", "[e2e][cli]") {
  const fs::path retrieval = scratch("eval_retrieval");
  CATCH_REQUIRE(train_retrieval(retrieval, 30).code == 0);
  const Result r = run_causal("eval --run " + retrieval.string());
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(r.out, Catch::Matchers::Contains("intervention accuracy"));
  const auto figures = nlohmann::json::parse(slurp(retrieval / "eval" / "step_00000030.json"));
  CATCH_CHECK(figures["loss"] == figures["test_loss"]);
  CATCH_CHECK(figures["loss"] == nlohmann::json::parse(slurp(
                                     retrieval / "results.json"))["test_loss"]);  // same model, same data
  fs::remove_all(retrieval);

  const fs::path text = scratch("eval_text");
  const fs::path run = train_text_run(text, 6);
  fs::remove(text / "train.tok");  // evaluation never needs the training split
  const Result t = run_causal("eval --run " + run.string() + " --checkpoint 4");
  CATCH_REQUIRE(t.code == 0);
  CATCH_CHECK_THAT(t.out, Catch::Matchers::Contains("val_bits_per_byte"));
  const auto at4 = nlohmann::json::parse(slurp(run / "eval" / "step_00000004.json"));
  for (const char* key : {"loss", "perplexity", "bits_per_byte"}) CATCH_CHECK(at4.contains(key));
  CATCH_CHECK(at4["perplexity"].get<double>() == Catch::Detail::Approx(std::exp(at4["loss"].get<double>())));
  const Result padded = run_causal("eval --run " + run.string() + " --set data.layout=padded");
  CATCH_REQUIRE(padded.code == 0);
  CATCH_CHECK_THAT(padded.out, Catch::Matchers::Contains("step_00000006.val-"));
  CATCH_CHECK(run_causal("eval --run " + run.string() + " --set model.d_model=64").code == 2);
  CATCH_CHECK(run_causal("eval --run " + run.string() + " --split test").code == 2);
  CATCH_CHECK(run_causal("eval --run " + run.string() + " --checkpoint 5").code == 4);  // not saved
  fs::remove_all(text);
}

CATCH_TEST_CASE("generate --verify-cache matches the full pass and sampling is reproducible", "[e2e][cli]") {
  const fs::path text = scratch("generate");
  const fs::path run = train_text_run(text, 6);
  const std::string base = "generate --run " + run.string() + " --prompt 'the cat' --max-new-tokens 12 ";
  const Result greedy = run_causal(base + "--temperature 0 --verify-cache");
  CATCH_REQUIRE(greedy.code == 0);
  const std::string marker = "verify-cache max_abs_diff=";
  const auto at = greedy.out.rfind(marker);
  CATCH_REQUIRE(at != std::string::npos);
  CATCH_CHECK(greedy.out.substr(at).find('\n') == greedy.out.size() - at - 1);  // the last line
  CATCH_CHECK(std::stod(greedy.out.substr(at + marker.size())) < 1e-4);
  const Result a = run_causal(base + "--seed 3 --top-k 5"), b = run_causal(base + "--seed 3 --top-k 5");
  CATCH_CHECK(a.code == 0);
  CATCH_CHECK(a.out == b.out);
  // --top-k above the vocabulary used to sample silently from all of it.
  const Result wide = run_causal(base + "--top-k 300");
  CATCH_CHECK(wide.code == 2);
  CATCH_CHECK(line_count(wide.err) == 1);
  CATCH_CHECK_THAT(wide.err, Catch::Matchers::Contains("--top-k 300") && Catch::Matchers::Contains("259"));
  const Result long_prompt =
      run_causal("generate --run " + run.string() + " --prompt " + std::string(24, 'x'));
  CATCH_CHECK(long_prompt.code == 2);
  CATCH_CHECK_THAT(long_prompt.err, Catch::Matchers::Contains("max_seq_len"));
  fs::remove_all(text);

  const fs::path retrieval = scratch("generate_retrieval");
  CATCH_REQUIRE(train_retrieval(retrieval, 2).code == 0);
  CATCH_CHECK(run_causal("generate --run " + retrieval.string() + " --prompt x").code == 4);
  fs::remove_all(retrieval);
}

// A run SIGKILLed before its first checkpoint restarts in place with --resume auto (a requeue loop used
// to fail forever: "already holds a run"); while it runs, its lock names the holder's pid; another run's
// config and --resume never are still refused and leave the folder as it was.
CATCH_TEST_CASE("a run killed before its first checkpoint restarts in place with --resume auto",
                "[e2e][cli][resume]") {
  const fs::path dir = scratch("sigkill");
  const pid_t pid = start_training(dir, "--set train.checkpoint_every=0");
  CATCH_REQUIRE(wait_for_rows(dir, 1));
  const std::string again = "train --config configs/retrieval.json --set train.log_every=1 --run-dir " +
                            dir.string() + " --set train.steps=5";
  const Result locked = run_causal(again);
  CATCH_CHECK(locked.code == 2);
  CATCH_CHECK(line_count(locked.err) == 1);
  CATCH_CHECK_THAT(locked.err, Catch::Matchers::Contains("locked") &&
                                   Catch::Matchers::Contains("pid " + std::to_string(pid)));
  kill(pid, SIGKILL);
  CATCH_CHECK(exit_code(pid) == 128 + SIGKILL);
  CATCH_REQUIRE(!fs::exists(dir / "checkpoints" / "LATEST"));
  const std::string log_before = slurp(dir / "log.txt");
  const std::string metrics_before = slurp(dir / "metrics.jsonl");

  const Result other = run_causal(again + " --set seed=99");
  CATCH_CHECK(other.code == 2);
  CATCH_CHECK_THAT(other.err, Catch::Matchers::Contains("another run") && Catch::Matchers::Contains("seed"));
  const Result never = run_causal(again + " --resume never");
  CATCH_CHECK(never.code == 2);
  CATCH_CHECK(slurp(dir / "log.txt") == log_before);
  CATCH_CHECK(slurp(dir / "metrics.jsonl") == metrics_before);

  const Result restarted = run_causal(again + " --resume auto");
  CATCH_INFO(restarted.err);
  CATCH_REQUIRE(restarted.code == 0);
  CATCH_CHECK(fs::exists(dir / "results.json"));
  CATCH_CHECK_THAT(restarted.err, Catch::Matchers::Contains("restarting"));
  const std::string log_after = slurp(dir / "log.txt");
  CATCH_CHECK(log_after.rfind(log_before, 0) == 0);  // the earlier log is kept, the new one appended
  CATCH_CHECK(log_after.size() > log_before.size());
  CATCH_CHECK(last_logged_step(dir) == 5);
  CATCH_CHECK(line_count(slurp(dir / "metrics.jsonl")) == 6);  // steps 1..5 once each + the eval row
  fs::remove_all(dir);
}

// Evaluation-time context extension and the retrieval studies' eval flags: RoPE scaling fields and a longer
// max_seq_len apply to a trained checkpoint; fields that would change the trained model are refused with
// the reason (exit 2); --lengths prints one accuracy per length; --split val and --difficulty write files of
// their own, never the default step_N.json.
CATCH_TEST_CASE(
    "eval applies rope scaling to a checkpoint, scores lengths, validation and the difficulty grid",
    "[e2e][cli]") {
  const fs::path run = scratch("eval_studies");
  CATCH_REQUIRE(run_causal("train --config configs/retrieval.json --set model.position=rope --set "
                           "train.steps=20 --run-dir " +
                           run.string())
                    .code == 0);
  const std::string eval = "eval --run " + run.string();
  const Result lengths = run_causal(eval +
                                    " --set model.rope.scaling=yarn --set model.rope.factor=2 --set "
                                    "model.max_seq_len=9 --lengths 2,4,8");
  CATCH_REQUIRE(lengths.code == 0);
  CATCH_CHECK_THAT(lengths.out, Catch::Matchers::Contains("retrieval accuracy by context length"));
  CATCH_CHECK_THAT(lengths.out, Catch::Matchers::Contains("trained length"));
  for (const char* n : {"\n       2  ", "\n       4  ", "\n       8  "})
    CATCH_CHECK_THAT(lengths.out, Catch::Matchers::Contains(n));
  const Result refused = run_causal(eval + " --set model.d_model=64");
  CATCH_CHECK(refused.code == 2);
  CATCH_CHECK_THAT(refused.err, Catch::Matchers::Contains("would change the trained weights"));
  CATCH_CHECK(run_causal(eval + " --set model.rope.theta=500").code == 2);
  CATCH_CHECK(run_causal(eval + " --lengths 2,8").code == 2);  // 8 + 1 > the trained max_seq_len 5

  CATCH_REQUIRE(run_causal(eval + " --split val").code == 0);
  const auto val = nlohmann::json::parse(slurp(run / "eval" / "step_00000020.val-e3b0c442.json"));
  CATCH_CHECK(val["loss"] == val["val_loss"]);
  CATCH_CHECK_FALSE(fs::exists(run / "eval" / "step_00000020.json"));

  const Result grid =
      run_causal(eval + " --difficulty --lengths 2,4 --distractors 0,1 --depths 0,1 --rows 16");
  CATCH_REQUIRE(grid.code == 0);
  CATCH_CHECK_THAT(grid.out, Catch::Matchers::Contains("difficulty grid"));
  fs::path written;
  for (const auto& e : fs::directory_iterator(run / "eval")) {
    if (e.path().filename().string().find("difficulty") != std::string::npos) written = e.path();
  }
  CATCH_REQUIRE(!written.empty());
  const auto cells = nlohmann::json::parse(slurp(written))["cells"];
  CATCH_CHECK(cells.size() == 2 * 2 * 2);  // lengths x distractors x evidence 0 and length - 1
  fs::remove_all(run);

  // A learned position table fixes max_seq_len.
  const fs::path learned = scratch("eval_learned");
  CATCH_REQUIRE(run_causal("train --config configs/retrieval.json --set model.position=learned --set "
                           "train.steps=2 --run-dir " +
                           learned.string())
                    .code == 0);
  const Result table = run_causal("eval --run " + learned.string() + " --set model.max_seq_len=9");
  CATCH_CHECK(table.code == 2);
  CATCH_CHECK_THAT(table.err, Catch::Matchers::Contains("position table"));
  fs::remove_all(learned);
}
