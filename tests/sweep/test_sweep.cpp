// `causal sweep`: the grid product and its folder names, sweep files, up-front validation of every point,
// the summary's groups, and the runner on tiny retrieval runs: finished points skipped, an interrupted one
// resumed from its checkpoint, a failed point reported while the others run.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/errors.h"
#include "support/cli.h"
#include "support/scratch_dir.h"
#include "sweep/sweep.h"
#include "sweep/sweep_spec.h"
#include "sweep/sweep_summary.h"

using namespace causal;
using causal::testing::run_causal;
using causal::testing::slurp;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kSweepBase = std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json";

// Tiny runs: a few seconds for a whole sweep.
SweepSpec tiny_sweep(const fs::path& out, const std::string& grid) {
  SweepSpec spec;
  spec.config = kSweepBase;
  spec.set = {"train.steps=12", "train.log_every=4", "train.checkpoint_every=4", "data.train_examples=256",
              "data.test_examples=64"};
  apply_grid_flag(spec, grid);
  spec.out = out.string();
  finish_sweep_spec(spec, "retrieval");
  return spec;
}

SweepOptions sweep_options(int64_t jobs) {
  SweepOptions o;
  o.executable = CAUSAL_BINARY;
  o.jobs = jobs;
  return o;
}

std::vector<std::string> point_names(const std::vector<SweepPoint>& points) {
  std::vector<std::string> out;
  for (const SweepPoint& p : points) out.push_back(p.name);
  return out;
}

}  // namespace

CATCH_TEST_CASE("sweep grid: the cartesian product, first key slowest, named by the values",
                "[unit][sweep]") {
  SweepSpec spec;
  spec.config = kSweepBase;
  apply_grid_flag(spec, "model.position=none,learned,rope");
  apply_grid_flag(spec, "seed=1,2,3");
  const std::vector<SweepPoint> points = grid_points(spec);
  CATCH_REQUIRE(points.size() == 9);
  CATCH_CHECK(point_names(points) ==
              std::vector<std::string>{"position=none,seed=1", "position=none,seed=2", "position=none,seed=3",
                                       "position=learned,seed=1", "position=learned,seed=2",
                                       "position=learned,seed=3", "position=rope,seed=1",
                                       "position=rope,seed=2", "position=rope,seed=3"});
  CATCH_CHECK(points[5].overrides() == std::vector<std::string>{"model.position=learned", "seed=3"});
  // Numbers stay numbers (the chart puts them on a numeric axis); the field types them when applied.
  CATCH_CHECK(points[5].values[1].second == json(3));

  // A --grid of a key already there replaces its values; a third key multiplies.
  apply_grid_flag(spec, "seed=7");
  apply_grid_flag(spec, "train.optimizer.lr=0.01,0.001");
  CATCH_CHECK(grid_points(spec).size() == 3 * 1 * 2);
  CATCH_CHECK(grid_points(spec).back().name == "position=rope,seed=7,lr=0.001");
}

CATCH_TEST_CASE("sweep grid: names stay distinct and filesystem-safe", "[unit][sweep]") {
  SweepSpec spec;
  spec.config = kSweepBase;
  // Two keys ending in "seed": the whole key names them.
  apply_grid_flag(spec, "seed=1");
  apply_grid_flag(spec, "data.seed=5,6");
  CATCH_CHECK(point_names(grid_points(spec)) ==
              std::vector<std::string>{"seed=1,data.seed=5", "seed=1,data.seed=6"});

  SweepSpec odd;
  odd.config = kSweepBase;
  odd.grid.push_back({"name", {json("a/b c"), json("..")}});
  const std::vector<SweepPoint> points = grid_points(odd);
  CATCH_CHECK(point_names(points) == std::vector<std::string>{"name=a_b_c", "name=.."});
  for (const SweepPoint& p : points) CATCH_CHECK(p.name.find('/') == std::string::npos);

  SweepSpec clash;
  clash.config = kSweepBase;
  clash.grid.push_back({"name", {json("a/b"), json("a b")}});  // both become name=a_b
  CATCH_CHECK_THROWS_AS(grid_points(clash), ConfigError);
  CATCH_CHECK_THROWS_WITH(grid_points(clash), Catch::Contains("share the folder name name=a_b"));

  CATCH_CHECK_THROWS_AS(apply_grid_flag(spec, "seed="), UsageError);
  CATCH_CHECK_THROWS_AS(apply_grid_flag(spec, "seed"), UsageError);
  CATCH_CHECK_THROWS_AS(apply_grid_flag(spec, "seed=1,,2"), UsageError);
}

CATCH_TEST_CASE("sweep file: config relative to the file, order kept, unknown keys refused",
                "[unit][sweep]") {
  testing::ScratchDir dir("sweep_file");
  fs::create_directories(dir.path / "configs" / "sweeps");
  fs::copy_file(kSweepBase, dir.path / "configs" / "retrieval.json");
  const fs::path file = dir.path / "configs" / "sweeps" / "position.json";
  std::ofstream(file) << R"({
    // comments allowed, as in configs
    "config": "../retrieval.json",
    "grid": {"seed": [1, 2], "model.position": ["none", "rope"]},
    "set": {"train.steps": 300, "model.position": "learned"},
    "metric": "test_accuracy",
    "out": "runs/position-sweep"
  })";
  SweepSpec spec = load_sweep_file(file.string());
  CATCH_CHECK(fs::equivalent(spec.config, dir.path / "configs" / "retrieval.json"));
  CATCH_REQUIRE(spec.grid.size() == 2);
  CATCH_CHECK(spec.grid[0].key == "seed");  // the file's order, not alphabetical
  CATCH_CHECK(spec.grid[1].values == std::vector<json>{"none", "rope"});
  CATCH_CHECK(spec.set == std::vector<std::string>{"train.steps=300", "model.position=learned"});
  CATCH_CHECK(spec.metric == "test_accuracy");
  finish_sweep_spec(spec, "retrieval");
  CATCH_CHECK(spec.group_by == "seed");  // the first grid key by default
  CATCH_CHECK(spec.out == "runs/position-sweep");

  const fs::path bad = dir.path / "bad.json";
  std::ofstream(bad) << R"({"config": "x.json", "grid": {"seed": [1]}, "metrics": "test_accuracy"})";
  CATCH_CHECK_THROWS_AS(load_sweep_file(bad.string()), ConfigError);
  CATCH_CHECK_THROWS_WITH(load_sweep_file(bad.string()),
                          Catch::Contains(bad.string()) && Catch::Contains("unknown key 'metrics'"));
  std::ofstream(bad) << R"({"config": "x.json", "grid": {"seed": []}})";
  CATCH_CHECK_THROWS_WITH(load_sweep_file(bad.string()),
                          Catch::Contains("grid.seed: expected a non-empty array"));
  std::ofstream(bad) << R"({"grid": {"seed": [1]}})";
  CATCH_CHECK_THROWS_WITH(load_sweep_file(bad.string()), Catch::Contains("config: missing"));

  SweepSpec by;
  by.config = kSweepBase;
  apply_grid_flag(by, "seed=1,2");
  by.group_by = "model.position";
  CATCH_CHECK_THROWS_WITH(finish_sweep_spec(by, "retrieval"),
                          Catch::Contains("'model.position' is not a grid key"));
}

CATCH_TEST_CASE("sweep points are resolved before any run: a bad value names its point", "[unit][sweep]") {
  SweepSpec spec;
  spec.config = kSweepBase;
  apply_grid_flag(spec, "model.position=none,sideways");
  apply_grid_flag(spec, "seed=1,2");
  const std::vector<SweepPoint> points = grid_points(spec);
  CATCH_CHECK_THROWS_AS(resolve_points(spec, points), ConfigError);
  CATCH_CHECK_THROWS_WITH(resolve_points(spec, points),
                          Catch::StartsWith("sweep point position=sideways,seed=1: ") &&
                              Catch::Contains("model.position") && Catch::Contains("sideways"));
  // The CLI refuses it the same way, and nothing is written.
  testing::ScratchDir out("sweep_bad_point");
  const testing::Result r = run_causal(
      "sweep --config configs/retrieval.json --grid model.position=none,sideways "
      "--grid seed=1 --out " +
      (out.path / "s").string());
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK(r.err.find("sweep point position=sideways,seed=1") != std::string::npos);
  CATCH_CHECK(!fs::exists(out.path / "s"));
}

CATCH_TEST_CASE("sweep summary: flattened fields, groups over seeds, mean and sample std", "[unit][sweep]") {
  SweepSpec spec;
  spec.config = kSweepBase;
  apply_grid_flag(spec, "model.position=none,rope");
  apply_grid_flag(spec, "seed=1,2,3");
  finish_sweep_spec(spec, "retrieval");
  std::vector<PointResult> points;
  const std::vector<double> acc{0.5, 0.7, 0.9, 1.0, 1.0, 1.0};
  for (const SweepPoint& p : grid_points(spec)) {
    PointResult r;
    r.point = p;
    r.run_dir = "/x/" + p.name;
    r.state = PointState::kFinished;
    r.results = {{"test_accuracy", acc[points.size()]},
                 {"run_dir", "/x"},
                 {"by", {{"0", {{"n", 4}}}}},
                 {"list", {1.5, 2.5}},
                 {"ok", true}};
    points.push_back(r);
  }
  points[5].state = PointState::kFailed;  // a failed point contributes nothing
  points[5].results = nullptr;
  points[5].exit_code = 3;
  points[5].error = "boom";
  const SweepSummary s = summarize_sweep(spec, points);
  CATCH_CHECK(s.columns == std::vector<std::string>{"by.0.n", "list.0", "list.1", "test_accuracy"});
  CATCH_CHECK(s.metric == "by.0.n");  // no metric given: the first numeric field
  CATCH_REQUIRE(s.groups.size() == 2);
  CATCH_CHECK(s.groups[0].values == std::vector<std::pair<std::string, json>>{{"model.position", "none"}});
  CATCH_CHECK(s.groups[0].count.at("test_accuracy") == 3);
  CATCH_CHECK(s.groups[0].mean.at("test_accuracy") == Approx(0.7));
  CATCH_CHECK(s.groups[0].std.at("test_accuracy") == Approx(0.2));  // sqrt(((-.2)^2 + 0 + .2^2) / 2)
  CATCH_CHECK(s.groups[1].count.at("test_accuracy") == 2);
  CATCH_CHECK(s.groups[1].std.at("test_accuracy") == 0.0);
  const std::string csv = summary_csv(s);
  CATCH_CHECK(csv.substr(0, csv.find('\n')) ==
              "point,state,model.position,seed,by.0.n,list.0,list.1,test_accuracy,error");
  CATCH_CHECK(csv.find("\"position=none,seed=2\",finished,none,2,4,1.5,2.5,0.7,\n") != std::string::npos);
  CATCH_CHECK(csv.find("\"position=rope,seed=3\",failed,rope,3,,,,,exit 3: boom\n") != std::string::npos);
  const json j = json::parse(summary_json(s).dump());
  CATCH_CHECK(j["rows"][1]["test_accuracy"] == 0.7);
  CATCH_CHECK(j["rows"][1]["model.position"] == "none");
  CATCH_CHECK(j["groups"][0]["fields"]["test_accuracy"]["n"] == 3);
}

CATCH_TEST_CASE("sweep summary: benchmark figures of results.json become columns and a chartable metric",
                "[unit][sweep]") {
  SweepSpec spec;
  spec.config = kSweepBase;
  apply_grid_flag(spec, "seed=1,2");
  spec.metric = "bench/brown-next-sentence/acc_norm";
  finish_sweep_spec(spec, "text");
  std::vector<PointResult> points;
  for (const SweepPoint& p : grid_points(spec)) {
    PointResult r;
    r.point = p;
    r.run_dir = "/x/" + p.name;
    r.state = PointState::kFinished;
    // train.eval_tasks puts these flat keys into results.json (task/benchmark_eval.h).
    r.results = {{"val_loss", 1.5},
                 {"bench/brown-next-sentence/acc", 0.3 + 0.1 * static_cast<double>(points.size())},
                 {"bench/brown-next-sentence/acc_norm", 0.4}};
    points.push_back(r);
  }
  const SweepSummary s = summarize_sweep(spec, points);
  CATCH_CHECK(s.columns == std::vector<std::string>{"bench/brown-next-sentence/acc",
                                                    "bench/brown-next-sentence/acc_norm", "val_loss"});
  CATCH_CHECK(s.metric == "bench/brown-next-sentence/acc_norm");
  CATCH_REQUIRE(s.groups.size() == 1);
  CATCH_CHECK(s.groups[0].mean.at("bench/brown-next-sentence/acc") == Approx(0.35));
  const std::string csv = summary_csv(s);
  CATCH_CHECK(
      csv.substr(0, csv.find('\n')) ==
      "point,state,seed,bench/brown-next-sentence/acc,bench/brown-next-sentence/acc_norm,val_loss,error");
}

CATCH_TEST_CASE("sweep runs every point once: finished points are skipped, an interrupted one resumes",
                "[e2e][sweep]") {
  testing::ScratchDir dir("sweep_resume");
  const SweepSpec spec = tiny_sweep(dir.path / "sweep", "seed=1,2,3");
  const std::vector<SweepPoint> points = grid_points(spec);
  const std::vector<RunConfig> configs = resolve_points(spec, points);
  // seed=3 was interrupted after step 4 (its checkpoint saved), as a preempted sweep would leave it.
  const fs::path stopped = dir.path / "sweep" / "seed=3";
  std::string stop = "train --config " + kSweepBase + " --run-dir " + stopped.string() + " --stop-at-step 4";
  for (const std::string& s : spec.set) stop += " --set " + s;
  stop += " --set seed=3";
  CATCH_REQUIRE(run_causal(stop).code == 0);
  CATCH_REQUIRE(!fs::exists(stopped / "results.json"));

  size_t observed = 0;
  const SweepOutcome first =
      run_sweep(spec, points, configs, sweep_options(2), [&](const auto&) { ++observed; });
  CATCH_CHECK(observed == 1 + 3);  // at the start and after each point
  CATCH_REQUIRE(first.points.size() == 3);
  for (const PointResult& p : first.points) {
    CATCH_INFO(p.point.name << ": " << p.error);
    CATCH_CHECK(p.state == PointState::kFinished);
    CATCH_CHECK(p.results["steps"] == 12);
    CATCH_CHECK(p.threads == 1);  // the config sets threads 1: kept
  }
  CATCH_CHECK(slurp(stopped / "log.txt").find("resuming from") != std::string::npos);
  CATCH_CHECK(slurp(dir.path / "sweep" / "seed=1" / "log.txt").find("resuming from") == std::string::npos);
  const json sweep = json::parse(slurp(dir.path / "sweep" / "sweep.json"));
  CATCH_CHECK(sweep["points"].size() == 3);
  CATCH_CHECK(sweep["grid"]["seed"] == json::array({1, 2, 3}));

  // Again with a fourth seed: the three finished points are skipped, untouched; only seed=4 trains.
  const auto written = fs::last_write_time(dir.path / "sweep" / "seed=1" / "results.json");
  const SweepSpec more = tiny_sweep(dir.path / "sweep", "seed=1,2,3,4");
  const std::vector<SweepPoint> more_points = grid_points(more);
  const SweepOutcome second =
      run_sweep(more, more_points, resolve_points(more, more_points), sweep_options(1));
  for (size_t i = 0; i < 3; ++i) {
    CATCH_CHECK(second.points[i].state == PointState::kSkipped);
    CATCH_CHECK(second.points[i].results == first.points[i].results);
  }
  CATCH_CHECK(second.points[3].state == PointState::kFinished);
  CATCH_CHECK(fs::last_write_time(dir.path / "sweep" / "seed=1" / "results.json") == written);

  // A finished point of another config in the folder is refused before anything runs.
  SweepSpec changed = tiny_sweep(dir.path / "sweep", "seed=1,2");
  changed.set.push_back("train.optimizer.lr=0.001");
  const std::vector<SweepPoint> changed_points = grid_points(changed);
  CATCH_CHECK_THROWS_WITH(
      run_sweep(changed, changed_points, resolve_points(changed, changed_points), sweep_options(1)),
      Catch::Contains("seed=1") && Catch::Contains("train.optimizer.lr"));
}

CATCH_TEST_CASE("sweep: a failed point is reported with its error and exit code while the others still run",
                "[e2e][sweep]") {
  testing::ScratchDir dir("sweep_failed");
  const fs::path out = dir.path / "sweep";
  // seed=2's folder holds something that is not a run: its `train` refuses it (exit 2) at run time.
  fs::create_directories(out / "seed=2");
  std::ofstream(out / "seed=2" / "notes.txt") << "not a run\n";
  const testing::Result r = run_causal(
      "sweep --config configs/retrieval.json --grid seed=1,2,3 --jobs 2 --set train.steps=8 --set "
      "data.train_examples=256 --set data.test_examples=64 --out " +
      out.string());
  CATCH_INFO(r.out << r.err);
  CATCH_CHECK(r.code == 1);
  CATCH_CHECK(r.err.find("1 of 3 points failed: seed=2 (exit 2)") != std::string::npos);
  CATCH_CHECK(r.out.find("2/3 seed=2: FAILED (exit 2)") != std::string::npos);
  CATCH_CHECK(r.out.find("already holds a run") != std::string::npos);
  CATCH_CHECK(fs::exists(out / "seed=1" / "results.json"));
  CATCH_CHECK(fs::exists(out / "seed=3" / "results.json"));
  CATCH_CHECK(slurp(out / "seed=2" / "notes.txt") == "not a run\n");  // never overwritten
  const json summary = json::parse(slurp(out / "summary.json"));
  CATCH_CHECK(summary["rows"][1]["state"] == "failed");
  CATCH_CHECK(summary["rows"][1]["error"].get<std::string>().rfind("exit 2: run folder", 0) == 0);
  CATCH_CHECK(summary["groups"][0]["fields"]["test_accuracy"]["n"] == 2);
}

CATCH_TEST_CASE("sweep: SIGINT is forwarded once to the running point, which stops at a checkpoint",
                "[e2e][sweep]") {
  testing::ScratchDir dir("sweep_signal");
  const fs::path out = dir.path / "sweep";
  // Enough steps that the point is still training when its first metrics row appears and the signal is sent.
  const std::string sweep = std::string(CAUSAL_BINARY) + " sweep --config " + kSweepBase +
                            " --grid seed=1,2 --set train.steps=20000 --set train.log_every=1 --set "
                            "train.checkpoint_every=100000 --out " +
                            out.string();
  const fs::path metrics = out / "seed=1" / "metrics.jsonl";
  const std::string script = "cd " + dir.path.string() + " && (" + sweep +
                             " >sweep.out 2>sweep.err & pid=$!; " + "for i in $(seq 1 600); do [ -s " +
                             metrics.string() +
                             " ] && break; sleep 0.05; done; kill -INT $pid; wait $pid; echo $? >rc)";
  CATCH_REQUIRE(std::system(("bash -c '" + script + "'").c_str()) == 0);
  CATCH_INFO(slurp(dir.path / "sweep.out") << slurp(dir.path / "sweep.err"));
  CATCH_CHECK(slurp(dir.path / "rc") == "130\n");
  CATCH_CHECK(slurp(dir.path / "sweep.err").find("SIGINT: sweep stopped") != std::string::npos);
  // The point stopped gracefully (one signal: it saved a checkpoint), the next one never started.
  const std::string log = slurp(out / "seed=1" / "log.txt");
  CATCH_CHECK(log.find("SIGINT received: stopped after step") != std::string::npos);
  CATCH_CHECK(log.find("second signal") == std::string::npos);
  CATCH_CHECK(fs::exists(out / "seed=1" / "checkpoints" / "LATEST"));
  CATCH_CHECK(!fs::exists(out / "seed=2"));
  const json summary = json::parse(slurp(out / "summary.json"));
  CATCH_CHECK(summary["rows"][0]["state"] == "stopped");
  CATCH_CHECK(summary["rows"][1]["state"] == "pending");
}
