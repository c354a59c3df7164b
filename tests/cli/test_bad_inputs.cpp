// The catalogue of bad inputs (docs/errors.md#catalogue-of-bad-inputs): each one ends `causal` with its
// documented exit code and exactly one stderr line "causal: error: ..." naming the file, key or value at
// fault, never a crash, and leaves a run folder or checkpoint that existed before as it was.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "support/byte_docs.h"
#include "support/scoped_env.h"
#include "support/skip.h"

using namespace causal::testing;
namespace fs = std::filesystem;

namespace {

// `train --config FILE ARGS --run-dir DIR/run`, checked to exit `code` naming `names` without creating
// the run folder.
void check_train_refused(const fs::path& config, const std::string& args, int code,
                         const std::vector<std::string>& names) {
  const fs::path run = config.parent_path() / "run";
  check_refused("train --config " + config.string() + " " + args + " --run-dir " + run.string(), code, names);
  CATCH_CHECK(!fs::exists(run));
}

const fs::path kRetrieval = fs::path(CAUSAL_SOURCE_DIR) / "configs" / "retrieval.json";

// A tiny text config whose data files exist and are valid; the data cases override data.train.
fs::path text_config(const fs::path& dir) {
  fs::create_directories(dir);
  write_byte_docs((dir / "train.tok").string(), {"the cat sat on the mat", "a dog ran"});
  write_byte_docs((dir / "val.tok").string(), {"the cat sat"});
  return write_file(dir, "text.json",
                    R"({"model": {"d_model": 16, "n_layers": 1, "max_seq_len": 16},
    "data": {"kind": "text", "train": ")" +
                        (dir / "train.tok").string() + R"(", "val": ")" + (dir / "val.tok").string() +
                        R"(", "seq_len": 16}, "train": {"steps": 2, "batch_size": 2}})");
}

}  // namespace

// --- config files -------------------------------------------------------------------------------------

CATCH_TEST_CASE("bad input: config file missing", "[unit][cli]") {
  const fs::path dir = scratch("bad_missing");
  check_train_refused(dir / "nope.json", "", 2, {"nope.json", "cannot open"});
}

CATCH_TEST_CASE("bad input: config file empty", "[unit][cli]") {
  const fs::path dir = scratch("bad_empty");
  check_train_refused(write_file(dir, "empty.json", ""), "", 2, {"empty.json", "line 1, column 1"});
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: config malformed JSON names line and column", "[unit][cli]") {
  const fs::path dir = scratch("bad_malformed");
  check_train_refused(write_file(dir, "bad.json", "{\n  \"model\": {\"d_model\": 64,}\n}"), "", 2,
                      {"bad.json", "line 2, column"});
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: config unknown key with a hint", "[unit][cli]") {
  const fs::path dir = scratch("bad_unknown");
  check_train_refused(write_file(dir, "c.json", R"({"model": {"d_modle": 64}})"), "", 2,
                      {"c.json", "model.d_modle", "did you mean 'd_model'"});
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: config wrong type", "[unit][cli]") {
  const fs::path dir = scratch("bad_type");
  check_train_refused(write_file(dir, "c.json", R"({"model": {"d_model": "abc"}})"), "", 2,
                      {"c.json", "model.d_model", "expected an integer", "\"abc\""});
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: config null value", "[unit][cli]") {
  const fs::path dir = scratch("bad_null");
  check_train_refused(write_file(dir, "c.json", R"({"model": {"d_model": null}})"), "", 2,
                      {"c.json", "model.d_model", "null"});
  fs::remove_all(dir);
}

// --- values, from --set -------------------------------------------------------------------------------

CATCH_TEST_CASE("bad input: lr <= 0", "[unit][cli]") {
  const fs::path dir = scratch("bad_lr");
  fs::create_directories(dir);
  check_refused("train --config " + kRetrieval.string() + " --set train.optimizer.lr=0 --run-dir " +
                    (dir / "run").string(),
                2, {"--set train.optimizer.lr", "must be > 0"});
  check_refused("train --config " + kRetrieval.string() + " --set train.optimizer.lr=-0.1", 2,
                {"train.optimizer.lr", "-0.1"});
  CATCH_CHECK(!fs::exists(dir / "run"));
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: lr nan (not JSON) and 1e400 (out of range)", "[unit][cli]") {
  check_refused("train --config configs/retrieval.json --set train.optimizer.lr=nan", 2,
                {"--set train.optimizer.lr", "nan"});
  check_refused("train --config configs/retrieval.json --set train.optimizer.lr=1e400", 2,
                {"train.optimizer.lr"});
}

CATCH_TEST_CASE("bad input: out-of-range train and model values", "[unit][cli]") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"train.steps=0", {"--set train.steps", "must be >= 1", "got 0"}},
      {"train.schedule.warmup_steps=320", {"train.schedule.warmup_steps", "must be < train.steps 320"}},
      {"model.dropout=1.0", {"model.dropout", "[0, 1)"}},
      {"train.grad_clip=-1", {"train.grad_clip", "-1"}},
      {"train.keep_checkpoints=0", {"train.keep_checkpoints", "must be >= 2"}},
      {"train.batch_size=0", {"train.batch_size", "must be >= 1"}},
      {"model.n_heads=5", {"model.n_heads", "divisible", "32"}},
      {"model.max_seq_len=3", {"model.max_seq_len", "exceeds model.max_seq_len 3"}},
      {"model.ffn=tanh", {"model.ffn", "gelu|gelu_tanh|swiglu|relu", "tanh"}},
      {"model.nope=1", {"model.nope", "unknown key"}},
      {"model.d_model=64abc", {"model.d_model", "64abc"}},
  };
  for (const auto& [set, names] : cases) {
    CATCH_INFO("--set " << set);
    check_refused("train --config configs/retrieval.json --set " + set, 2, names);
  }
}

// A model rule validation can check is a config error (exit 2) before anything is built, never the model's
// own assert (exit 1, "[transformer]"): retrieval has two input fields, and a tied head needs exactly one.
CATCH_TEST_CASE("bad input: tied embeddings with the two input fields of retrieval", "[unit][cli]") {
  const fs::path dir = scratch("bad_tied");
  const Result r =
      check_refused("train --config configs/retrieval.json --set model.tie_embeddings=true --run-dir " +
                        (dir / "run").string(),
                    2,
                    {"--set model.tie_embeddings",
                     "model.tie_embeddings: true needs exactly one input "
                     "field",
                     "model.output_vocab 8", "got 2 input field(s): key 8, value 9"});
  CATCH_CHECK_THAT(r.err, !Catch::Matchers::Contains("[transformer]"));
  CATCH_CHECK(!fs::exists(dir / "run"));
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: text data.seq_len above model.max_seq_len", "[unit][cli]") {
  check_refused("train --config configs/text-small.json --set data.seq_len=129", 2,
                {"--set data.seq_len", "model.max_seq_len 128"});
}

// --- data files ---------------------------------------------------------------------------------------

CATCH_TEST_CASE("bad input: training token file missing, a directory, empty, bad magic, truncated",
                "[unit][cli]") {
  const fs::path dir = scratch("bad_data");
  const fs::path config = text_config(dir);
  std::string good = slurp(dir / "train.tok");
  std::string magic = good;
  magic[0] = 'X';
  const std::vector<std::pair<fs::path, std::vector<std::string>>> cases = {
      {dir / "absent.tok", {"absent.tok"}},
      {dir, {dir.string()}},
      {write_file(dir, "empty.tok", ""), {"empty.tok", "empty"}},
      {write_file(dir, "magic.tok", magic), {"magic.tok", "magic"}},
      {write_file(dir, "short.tok", good.substr(0, good.size() - 3)), {"short.tok"}},
  };
  for (const auto& [file, names] : cases) {
    CATCH_INFO("data.train=" << file);
    check_train_refused(config, "--set data.train=" + file.string(), 3, names);
  }
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: token id >= vocab", "[unit][cli]") {
  const fs::path dir = scratch("bad_token_id");
  const fs::path config = text_config(dir);
  {
    // Token 1 (the first byte after BOS) of the u16 body, which starts at byte 128, becomes 65535.
    std::fstream f(dir / "train.tok", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(128 + 2);
    f.put('\xff');
    f.put('\xff');
  }
  check_train_refused(config, "", 3, {"train.tok", "token id 65535", "vocab size 259"});
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: token file with another format version or a header that lies about its size",
                "[unit][cli]") {
  const fs::path dir = scratch("bad_token_header");
  const fs::path config = text_config(dir);
  const std::string good = slurp(dir / "train.tok");
  std::string version = good, size = good;
  version[8] = 99;    // the u32 format version at byte 8
  size[24] = '\x7f';  // the u64 token count at byte 24: more tokens than the file holds
  check_train_refused(config, "--set data.train=" + write_file(dir, "v99.tok", version).string(), 3,
                      {"v99.tok", "format version 99"});
  check_train_refused(config, "--set data.train=" + write_file(dir, "size.tok", size).string(), 3,
                      {"size.tok", "truncated or corrupt"});
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: token file unreadable (permission)", "[unit][cli]") {
  if (::geteuid() == 0)
    CAUSAL_SKIP_TEST("running as root, which reads any file: the unreadable-file case cannot be made here");
  const fs::path dir = scratch("bad_unreadable");
  const fs::path config = text_config(dir);
  ::chmod((dir / "train.tok").c_str(), 0);
  check_train_refused(config, "", 3, {"train.tok", "Permission denied"});
  fs::remove_all(dir);
}

// Documented policy (docs/errors.md): a file shorter than one row is no error; its one row is padded and
// only its real labels count.
CATCH_TEST_CASE("bad input: fewer tokens than one row trains on one padded row", "[e2e][cli]") {
  const fs::path dir = scratch("bad_short_data");
  const fs::path config = text_config(dir);
  write_byte_docs((dir / "tiny.tok").string(), {"a"});
  const Result r =
      run_causal("train --config " + config.string() + " --set data.train=" + (dir / "tiny.tok").string() +
                 " --run-dir " + (dir / "run").string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  const std::string results = slurp(dir / "run" / "results.json");
  CATCH_CHECK_THAT(results, Catch::Matchers::Contains("\"steps\": 2"));
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: tokenizer of the validation file differs from the training file's",
                "[unit][cli]") {
  const fs::path dir = scratch("bad_tokenizer_split");
  const fs::path config = text_config(dir);
  causal::TokenizerInfo other = causal::ByteTokenizer().info();
  other.name = "bytes-v2";
  causal::write_token_file((dir / "other.tok").string(), other, {256, 97, 257}, {0});
  check_train_refused(config, "--set data.val=" + (dir / "other.tok").string(), 3,
                      {"other.tok", "bytes-v2", "train.tok"});
  fs::remove_all(dir);
}

CATCH_TEST_CASE("bad input: tokenizer vocabulary differs from the model's", "[unit][cli]") {
  const fs::path dir = scratch("bad_tokenizer_model");
  const fs::path config = text_config(dir);
  check_train_refused(
      config, R"(--set 'model.inputs=[{"name": "token", "vocab": 100}]' --set model.output_vocab=100)", 3,
      {"train.tok", "259", "100"});
  fs::remove_all(dir);
}

// Documented policy (docs/errors.md): the training data repeats, each pass in a new document order; a
// run longer than one pass is no error.
CATCH_TEST_CASE("bad input: data exhausted before the last step starts another epoch", "[e2e][cli]") {
  const fs::path dir = scratch("bad_data_epochs");
  const fs::path config = text_config(dir);
  const Result r = run_causal("train --config " + config.string() + " --set train.steps=12 --run-dir " +
                              (dir / "run").string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(slurp(dir / "run" / "results.json"), Catch::Matchers::Contains("\"steps\": 12"));
  fs::remove_all(dir);
}

// --- checkpoints --------------------------------------------------------------------------------------

CATCH_TEST_CASE("bad input: --resume PATH with nothing there", "[unit][cli]") {
  const fs::path dir = scratch("bad_resume_path");
  check_refused("train --config configs/retrieval.json --resume " + (dir / "nothing").string(), 4,
                {(dir / "nothing").string()});
  CATCH_CHECK(!fs::exists(dir));
}

CATCH_TEST_CASE("bad input: eval and generate on a run folder without checkpoints", "[unit][cli]") {
  const fs::path dir = scratch("bad_no_checkpoints");
  fs::create_directories(dir);
  const Result config = run_causal("train --config configs/retrieval.json --print-config");
  CATCH_REQUIRE(config.code == 0);
  write_file(dir, "config.json", config.out);
  write_file(dir, "metrics.jsonl", "");
  const auto before = hash_tree(dir);
  check_refused("eval --run " + dir.string(), 4, {dir.string(), "checkpoint"});
  check_refused("generate --run " + dir.string() + " --prompt hi", 4, {dir.string(), "checkpoint"});
  CATCH_CHECK(hash_tree(dir) == before);
  fs::remove_all(dir);
}

// --- the command line ---------------------------------------------------------------------------------

CATCH_TEST_CASE("bad input: unknown subcommand, unknown flag, missing required flag", "[unit][cli]") {
  check_refused("frobnicate", 2, {"frobnicate", "--help"});
  check_refused("train --bogus", 2, {"--bogus", "causal train --help"});
  check_refused("eval", 2, {"--run", "causal eval --help"});
}

CATCH_TEST_CASE("bad input: generate --max-new-tokens 0 and -1, --top-k -3", "[unit][cli]") {
  for (const char* value : {"0", "-1"}) {
    check_refused(std::string("generate --run x --prompt a --max-new-tokens ") + value, 2,
                  {"--max-new-tokens"});
  }
  check_refused("generate --run x --prompt a --top-k -3", 2, {"--top-k"});
}

// NaN and inf passed CLI11's non-negative check and reached the sampler (exit 1, a LibTorch error).
CATCH_TEST_CASE("bad input: generate --temperature nan, inf, -1", "[unit][cli]") {
  for (const char* value : {"nan", "inf", "-1"}) {
    CATCH_INFO("--temperature " << value);
    check_refused(std::string("generate --run x --prompt a --temperature ") + value, 2,
                  {"--temperature", "finite", ">= 0"});
  }
}

// Invariant: a peak passed down by a parent is the one the run reports MFU against, and the log says where
// it came from; a value that is no positive number is refused before any run folder exists.
CATCH_TEST_CASE("bad input: CAUSAL_MATMUL_PEAK_GFLOPS not a positive number (a good one is used and named)",
                "[unit][cli]") {
  const Result measured = run_causal("bench --matmul-peak");
  CATCH_REQUIRE(measured.code == 0);
  CATCH_CHECK(line_count(measured.out) == 1);
  CATCH_CHECK(std::stod(measured.out) > 1.0);

  const fs::path dir = scratch("inherited_peak");
  for (const char* bad : {"abc", "-3", "0", "nan", "5x"}) {
    const ScopedEnv peak{{"CAUSAL_MATMUL_PEAK_GFLOPS", bad}};
    check_refused(retrieval_run_args("--run-dir " + dir.string()), 2,
                  {std::string("CAUSAL_MATMUL_PEAK_GFLOPS=") + bad, "positive number"});
    CATCH_CHECK_FALSE(fs::exists(dir));
  }
  const Result r = [&] {
    const ScopedEnv peak{{"CAUSAL_MATMUL_PEAK_GFLOPS", "12.5"}};
    return run_causal(retrieval_run_args("--run-dir " + dir.string()));
  }();
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(slurp(dir / "log.txt"),
                   Catch::Matchers::Contains("matmul peak 12.5 GFLOP/s (from CAUSAL_MATMUL_PEAK_GFLOPS)"));
  fs::remove_all(dir);
}
