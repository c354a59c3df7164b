// End to end, instruction tuning as a user does it: a small byte model trained on the Brown sample goes out
// as a GGUF and comes back in without data, the bundled chat instruction set (data/instructions) is encoded
// with its loss mask, the model is tuned on it, and then answers through the chat template. Only answers
// enter the loss: the loss on them falls, and every logged step counts exactly the supervised labels. The
// bundled benchmark (eval --tasks) is scored before and after.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config_io.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "support/bundled_benchmark.h"
#include "support/cli.h"
#include "task/task.h"

using namespace causal;
using namespace causal::testing;
namespace fs = std::filesystem;

namespace {

void causal_ok(const std::string& args) {
  const Result r = run_causal(args);
  CATCH_INFO("causal " << args << "\n" << r.err);
  CATCH_REQUIRE(r.code == 0);
}

double eval_loss(const fs::path& run, const std::string& val) {
  const Result r = run_causal("eval --run " + run.string() + " --set data.val=" + val);
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  const size_t at = r.out.find("written to ");
  CATCH_REQUIRE(at != std::string::npos);
  std::string file = r.out.substr(at + 11);
  file = file.substr(0, file.find('\n'));
  const double loss = nlohmann::json::parse(slurp(file)).at("loss").get<double>();
  fs::remove(file);  // the next evaluation, of another checkpoint, writes its own
  return loss;
}

// The line of `eval --tasks` for the bundled benchmark's first groups, on the run's newest checkpoint.
std::string benchmark_line(const fs::path& run) {
  const fs::path groups = run.parent_path() / "brown-groups.jsonl";
  write_bundled_groups(groups);
  const Result r = run_causal("eval --run " + run.string() + " --tasks " + groups.string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  const size_t at = r.out.find("brown-groups ");
  CATCH_REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  CATCH_CHECK(line.find("n=" + std::to_string(kBundledGroupItems)) != std::string::npos);
  return line;
}

}  // namespace

CATCH_TEST_CASE(
    "instruction tuning: a tuned model's answer loss falls, no prompt token enters the loss, and it "
    "answers in the chat template",
    "[e2e][text]") {
  const fs::path root = scratch("e2e_instruct");
  fs::create_directories(root);
  const std::string small =
      "--set model.d_model=64 --set model.n_layers=2 --set model.dropout=0 --set train.eval_every=0 "
      "--set train.schedule.warmup_steps=20 ";
  // A tiny trained model, out as a GGUF and in again without data: the pretrained-model route.
  causal_ok("train --config configs/text-small.json " + small + "--set train.steps=150 --run-dir " +
            (root / "base").string());
  causal_ok("export --run " + (root / "base").string() + " --format gguf --out " +
            (root / "base.gguf").string());
  const fs::path run = root / "tuned";
  causal_ok("import --format gguf --input " + (root / "base.gguf").string() + " --out " + run.string());

  const std::string train_tok = (root / "instr.train.tok").string(),
                    val_tok = (root / "instr.val.tok").string();
  for (const auto& [input, out] : {std::pair{"train", train_tok}, std::pair{"val", val_tok}}) {
    causal_ok(std::string("data encode --format chat --input data/instructions/") + input + ".jsonl --out " +
              out);
  }
  const TokenFile train_file(train_tok);
  CATCH_REQUIRE(train_file.header().loss_mask);
  const int64_t labels = train_file.num_tokens() - train_file.num_documents();
  CATCH_CHECK(train_file.supervised_labels() < labels / 3);  // answers are short beside their prompts

  const double before = eval_loss(run, val_tok);
  const std::string benchmark_before = benchmark_line(run);
  const int64_t steps = 200;
  causal_ok("train --run-dir " + run.string() + " --resume auto --set data.train=" + train_tok +
            " --set data.val=" + val_tok + " --set train.steps=" + std::to_string(steps) +
            " --set train.log_every=1 --set train.eval_every=0 --set train.optimizer.lr=0.003");
  const double after = eval_loss(run, val_tok);
  CATCH_WARN("answer loss on the held-out words: before " << before << ", after " << after);
  CATCH_WARN("benchmark before: " << benchmark_before << "\nbenchmark after:  " << benchmark_line(run));
  CATCH_CHECK(after < 0.5 * before);

  // Every step's valid tokens are the supervised labels of the rows it trained on, replayed from the same
  // file, seed and batch size: fewer than the positions the rows fill.
  const RunConfig config = load_config((run / "config.json").string(), {});
  TextBatchSource replay(TokenFile(train_tok), TextRowOptions::from(config.data), config.train.batch_size,
                         batch_seed(config.seed));
  std::ifstream metrics(run / "metrics.jsonl");
  int64_t checked = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (!row.contains("valid_tokens")) continue;
    const Batch batch = replay.next();
    const int64_t filled = batch.key_valid.sum().item<int64_t>();
    CATCH_CHECK(row["valid_tokens"].get<int64_t>() == batch.valid_tokens());
    CATCH_CHECK(batch.valid_tokens() < filled / 2);
    ++checked;
  }
  CATCH_CHECK(checked == steps);

  const Result answer = run_causal("generate --run " + run.string() +
                                   " --chat 'upper: house' --temperature 0 --max-new-tokens 40");
  CATCH_INFO(answer.err);
  CATCH_REQUIRE(answer.code == 0);
  CATCH_WARN("generate --chat 'upper: house' -> " << answer.out);
  CATCH_CHECK(answer.err.find("stopped: end_of_turn") != std::string::npos);
  CATCH_CHECK(answer.out.find("<|im_") == std::string::npos);
  fs::remove_all(root);
}
