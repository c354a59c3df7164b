// End to end: a byte-level model trained on the bundled Brown config with train.eval_tasks carries the
// figures of the bundled benchmark's first groups in its eval rows, results.json and report.html; `eval
// --tasks` on the final checkpoint reproduces them; without their contexts the items score exactly chance;
// bad requests are refused by file, line and flag. And a small subword model trained here in minutes
// scores above chance on the whole bundled benchmark.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/bundled_benchmark.h"
#include "support/cli.h"
#include "support/metrics_rows.h"

using namespace causal::testing;

namespace {

const std::string kBundled = "data/benchmarks/brown-next-sentence.jsonl";
const std::string kKey = "bench/brown-groups/";

// eval --tasks FILE on `run`: the benchmark's entry of the JSON it wrote.
nlohmann::json eval_tasks(const fs::path& run, const std::string& file, const std::string& name) {
  const Result r = run_causal("eval --run " + run.string() + " --tasks " + file + " --set threads=1");
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(r.out, Catch::Matchers::Contains("acc_norm") && Catch::Matchers::Contains("items/s"));
  const size_t at = r.out.rfind("written to ");
  CATCH_REQUIRE(at != std::string::npos);
  std::string path = r.out.substr(at + 11);
  path = path.substr(0, path.find('\n'));
  CATCH_CHECK_THAT(path, Catch::Matchers::Contains(".tasks-"));
  return nlohmann::json::parse(slurp(fs::path(CAUSAL_SOURCE_DIR) / path))["benchmarks"][name];
}

}  // namespace

CATCH_TEST_CASE("benchmark: train.eval_tasks and eval --tasks score the bundled benchmark alike",
                "[e2e][benchmark]") {
  const fs::path dir = scratch("e2e_benchmark");
  fs::create_directories(dir);
  const fs::path run = dir / "run";
  const fs::path groups = dir / "brown-groups.jsonl";
  write_bundled_groups(groups);
  // One thread: ctest runs tests side by side, and two processes with a thread per core each crawl.
  Result r = run_causal(
      "train --config configs/text-small.json --set threads=1 --set train.steps=160 --set "
      "train.eval_every=80 "
      "--set train.schedule.warmup_steps=20 --set 'train.eval_tasks=[\"" +
      groups.string() + "\"]' --run-dir " + run.string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(r.out, Catch::Matchers::Contains("brown-groups") && Catch::Matchers::Contains("chance"));

  // Every evaluation, periodic and final, scored the benchmark; results.json holds the final one.
  const std::vector<nlohmann::json> rows = metrics_rows(run, "eval");
  CATCH_REQUIRE(rows.size() == 2);
  for (const nlohmann::json& row : rows) {
    CATCH_INFO("eval row at step " << row["step"]);
    for (const char* figure : {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "chance", "items_per_s"})
      CATCH_CHECK(row.contains(kKey + figure));
    CATCH_CHECK(row[kKey + "items"] == kBundledGroupItems);
  }
  const nlohmann::json results = nlohmann::json::parse(slurp(run / "results.json"));
  for (const char* figure : {"acc", "acc_norm", "acc_stderr", "acc_norm_stderr"})
    CATCH_CHECK(results[kKey + figure] == rows.back()[kKey + figure]);
  CATCH_CHECK(results[kKey + "chance"].get<double>() == Approx(0.25));

  // The same checkpoint scored again by eval --tasks: the same choices, so the same figures.
  const nlohmann::json again = eval_tasks(run, groups.string(), "brown-groups");
  CATCH_CHECK(again["acc"] == results[kKey + "acc"]);
  CATCH_CHECK(again["acc_norm"] == results[kKey + "acc_norm"]);
  CATCH_CHECK(again["per_item"].size() == kBundledGroupItems);
  CATCH_CHECK(again["truncated_choices"].get<int64_t>() > 0);  // max_seq_len 128 cuts the long contexts
  const double acc = again["acc"].get<double>(), acc_norm = again["acc_norm"].get<double>();
  const double stderr_norm = again["acc_norm_stderr"].get<double>();
  CATCH_CHECK(stderr_norm == Approx(std::sqrt(acc_norm * (1 - acc_norm) / (kBundledGroupItems - 1.0))));
  CATCH_CHECK(again["acc_norm_ci95"][0].get<double>() == Approx(acc_norm - 1.96 * stderr_norm));
  CATCH_WARN("first 25 groups after 160 steps: acc " << acc << ", acc_norm " << acc_norm << " +- "
                                                     << 1.96 * stderr_norm << ", " << again["items_per_s"]
                                                     << " items/s");

  // Without their contexts a group's four items are one question asked four times, whose four choices
  // are their four answers: whatever the model prefers, it is right on exactly one, so chance exactly.
  {
    std::ifstream in(groups);
    std::ofstream out(dir / "no-context.jsonl");
    for (std::string line; std::getline(in, line);) {
      nlohmann::json item = nlohmann::json::parse(line);
      item["context"] = "";
      out << item.dump() << "\n";
    }
  }
  const nlohmann::json blind = eval_tasks(run, (dir / "no-context.jsonl").string(), "no-context");
  CATCH_CHECK(blind["acc_norm"].get<double>() == 0.25);
  CATCH_CHECK(blind["acc"].get<double>() == 0.25);

  r = run_causal("report --run " + run.string());
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(slurp(run / "report.html"), Catch::Matchers::Contains("Benchmarks (eval rows)"));

  // Refusals: a bad line names its file, line and field (exit 3); --tasks with --split (exit 2).
  std::ofstream(dir / "bad.jsonl") << R"({"context": "a", "choices": ["b", "c"], "answer": 0})"
                                   << "\n"
                                   << R"({"context": "a", "choices": ["b", "c"], "answer": 5})"
                                   << "\n";
  r = run_causal("eval --run " + run.string() + " --tasks " + (dir / "bad.jsonl").string());
  CATCH_CHECK(r.code == 3);
  CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains((dir / "bad.jsonl").string() +
                                                    ":2: field 'answer': 5 is not a choice: expected 0..1"));
  r = run_causal("eval --run " + run.string() + " --tasks " + kBundled + " --split val");
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains("--tasks scores only the benchmarks"));
  fs::remove_all(dir);
}

CATCH_TEST_CASE("benchmark: a small subword model trained here scores above chance on the bundled benchmark",
                "[e2e][benchmark]") {
  const fs::path dir = scratch("e2e_benchmark_above_chance");
  fs::create_directories(dir);
  const fs::path run = dir / "run";
  // configs/text-bpe.json as it is (600 steps, ~0.9M parameters, a window of ~330 bytes); one thread.
  Result r = run_causal("train --config configs/text-bpe.json --set threads=1 --run-dir " + run.string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  const nlohmann::json scores = eval_tasks(run, kBundled, "brown-next-sentence");
  CATCH_REQUIRE(scores["items"].get<int64_t>() >= 1000);
  CATCH_WARN("bundled benchmark, text-bpe after 600 steps: acc "
             << scores["acc"] << " [" << scores["acc_ci95"][0] << ", " << scores["acc_ci95"][1]
             << "], acc_norm " << scores["acc_norm"] << " [" << scores["acc_norm_ci95"][0] << ", "
             << scores["acc_norm_ci95"][1] << "], " << scores["items_per_s"] << " items/s");
  // Above chance: the 95% interval lies above 0.25, which no context-blind scorer can reach here.
  CATCH_CHECK(scores["acc_ci95"][0].get<double>() > 0.25);
  CATCH_CHECK(scores["acc_norm_ci95"][0].get<double>() > 0.25);
  fs::remove_all(dir);
}
