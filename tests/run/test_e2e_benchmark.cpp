// End to end: a byte-level model trained on the bundled Brown config with train.eval_tasks carries the
// bundled benchmark's figures in its eval rows, results.json and report.html; `eval --tasks` on the final
// checkpoint reproduces them; the benchmark gives nothing away without its contexts; bad requests are
// refused by file, line and flag.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/metrics_rows.h"

using namespace causal::testing;

namespace {

const std::string kBundled = "data/benchmarks/brown-next-sentence.jsonl";
const std::string kKey = "bench/brown-next-sentence/";

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
  // One thread: ctest runs tests side by side, and two processes with a thread per core each crawl.
  Result r = run_causal(
      "train --config configs/text-small.json --set threads=1 --set train.steps=160 --set "
      "train.eval_every=80 "
      "--set train.schedule.warmup_steps=20 --set 'train.eval_tasks=[\"" +
      kBundled + "\"]' --run-dir " + run.string());
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(r.out,
                   Catch::Matchers::Contains("brown-next-sentence") && Catch::Matchers::Contains("chance"));

  // Every evaluation, periodic and final, scored the benchmark; results.json holds the final one.
  const std::vector<nlohmann::json> rows = metrics_rows(run, "eval");
  CATCH_REQUIRE(rows.size() == 2);
  for (const nlohmann::json& row : rows) {
    CATCH_INFO("eval row at step " << row["step"]);
    for (const char* figure : {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "chance", "items_per_s"})
      CATCH_CHECK(row.contains(kKey + figure));
    CATCH_CHECK(row[kKey + "items"] == 101);
  }
  const nlohmann::json results = nlohmann::json::parse(slurp(run / "results.json"));
  for (const char* figure : {"acc", "acc_norm", "acc_stderr", "acc_norm_stderr"})
    CATCH_CHECK(results[kKey + figure] == rows.back()[kKey + figure]);
  CATCH_CHECK(results[kKey + "chance"].get<double>() == Approx(0.25));

  // The same checkpoint scored again by eval --tasks: the same choices, so the same figures.
  const nlohmann::json again = eval_tasks(run, kBundled, "brown-next-sentence");
  CATCH_CHECK(again["acc"] == results[kKey + "acc"]);
  CATCH_CHECK(again["acc_norm"] == results[kKey + "acc_norm"]);
  CATCH_CHECK(again["per_item"].size() == 101);
  CATCH_CHECK(again["truncated_choices"].get<int64_t>() > 0);  // max_seq_len 128 cuts the long contexts
  const double acc = again["acc"].get<double>(), acc_norm = again["acc_norm"].get<double>();
  const double stderr_norm = again["acc_norm_stderr"].get<double>();
  CATCH_CHECK(stderr_norm == Approx(std::sqrt(acc_norm * (1 - acc_norm) / 100.0)));  // n - 1 = 100
  CATCH_CHECK(again["acc_norm_ci95"][0].get<double>() == Approx(acc_norm - 1.96 * stderr_norm));
  CATCH_WARN("bundled benchmark after 160 steps: acc " << acc << ", acc_norm " << acc_norm << " +- "
                                                       << 1.96 * stderr_norm << ", " << again["items_per_s"]
                                                       << " items/s");

  // Without their contexts the choices are a fair draw: length-matched sentences of held-out documents, so
  // a model that reads only the choice stays within chance's 95% interval (0.25 +- 1.96 sqrt(.25 .75 / 101)).
  {
    std::ifstream in(fs::path(CAUSAL_SOURCE_DIR) / kBundled);
    std::ofstream out(dir / "no-context.jsonl");
    for (std::string line; std::getline(in, line);) {
      nlohmann::json item = nlohmann::json::parse(line);
      item["context"] = "";
      out << item.dump() << "\n";
    }
  }
  const nlohmann::json blind = eval_tasks(run, (dir / "no-context.jsonl").string(), "no-context");
  const double chance_half_width = 1.96 * std::sqrt(0.25 * 0.75 / 101.0);
  CATCH_CHECK(std::abs(blind["acc_norm"].get<double>() - 0.25) < chance_half_width);
  CATCH_CHECK(std::abs(blind["acc"].get<double>() - 0.25) < chance_half_width);

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
