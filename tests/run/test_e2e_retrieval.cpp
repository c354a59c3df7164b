// End to end: the lab config trains to the lab's thresholds (docs/retrieval-lab.md) for five different seeds.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "config/config_io.h"
#include "run/train_run.h"
#include "task/lab_checks.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

// A run in `dir` that does not print its results table.
TrainRequest quiet_request(const fs::path& dir) {
  TrainRequest request;
  request.start.run_dir = dir.string();
  request.print_table = false;
  return request;
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("causal_e2e_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// Every check of the lab's table (task/lab_checks.h), each on a figure the results must hold.
void check_lab_thresholds(const nlohmann::json& r) {
  CATCH_INFO(r.dump());
  CATCH_REQUIRE(lab_checks().size() == 5);
  for (const LabCheck& check : lab_checks()) {
    CATCH_INFO(check.field << " " << lab_check_rule(check));
    CATCH_REQUIRE(r.contains(check.field));
    CATCH_CHECK(lab_check_passes(check, r[check.field].get<double>(), r));
  }
}

}  // namespace

CATCH_TEST_CASE("configs/retrieval.json passes the lab's checks for 5 seeds", "[e2e][retrieval]") {
  for (int seed : {12, 1, 2, 3, 4}) {
    CATCH_SECTION("seed " + std::to_string(seed)) {
      RunConfig config = load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json",
                                     {"seed=" + std::to_string(seed)});
      fs::path dir = fresh_dir("retrieval_" + std::to_string(seed));
      nlohmann::json r = train_run(config, quiet_request(dir)).results;
      check_lab_thresholds(r);
      // The run folder holds what docs/run-folder.md promises.
      for (const char* f : {"config.json", "log.txt", "metrics.jsonl", "results.json"}) {
        CATCH_CHECK(fs::exists(dir / f));
      }
      fs::remove_all(dir);
    }
  }
}

// The same checks with the products in bfloat16: the causality difference stays exactly 0, since masked keys
// still get weight exactly 0.
CATCH_TEST_CASE("configs/retrieval.json under bf16 autocast passes the lab's checks",
                "[e2e][retrieval][autocast]") {
  RunConfig config =
      load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json", {"model.autocast=bf16"});
  fs::path dir = fresh_dir("retrieval_bf16");
  nlohmann::json r = train_run(config, quiet_request(dir)).results;
  check_lab_thresholds(r);
  fs::remove_all(dir);
}

// The trained query-only baseline: the same model, budget and seed on rows cut to the query record learns
// nothing that carries over to test (values are independent of keys), unlike the full model of the test
// above. It has no evidence record, so no intervention figure; periodic rows score the validation split.
CATCH_TEST_CASE("a model trained on query records only stays near chance", "[e2e][retrieval]") {
  RunConfig config = load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json",
                                 {"data.query_only=true", "train.eval_every=160"});
  fs::path dir = fresh_dir("retrieval_query_only");
  nlohmann::json r = train_run(config, quiet_request(dir)).results;
  CATCH_INFO(r.dump());
  CATCH_CHECK(r["test_accuracy"].get<double>() < 0.25);
  CATCH_CHECK(r["test_accuracy"] == r["no_context_accuracy"]);  // the same inputs
  CATCH_CHECK_FALSE(r.contains("intervention_accuracy"));
  CATCH_CHECK(r["test_loss"].get<double>() > 0.9 * r["initial_loss"].get<double>());
  std::ifstream metrics(dir / "metrics.jsonl");
  int periodic = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (row["kind"] == "eval" && row["step"] == 160) {
      ++periodic;
      CATCH_CHECK(row.contains("val_accuracy"));
      CATCH_CHECK_FALSE(row.contains("test_accuracy"));  // the test split is read once, at the end
    }
  }
  CATCH_CHECK(periodic == 1);
  fs::remove_all(dir);
}
