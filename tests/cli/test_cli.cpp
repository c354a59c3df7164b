// The `causal` binary as a user meets it: help, exit codes, one-line errors, run folders never overwritten.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/cli.h"

using namespace causal::testing;
namespace fs = std::filesystem;

CATCH_TEST_CASE("causal --help names the commands and exits 0", "[unit][cli]") {
  Result r = run_causal("--help");
  CATCH_CHECK(r.code == 0);
  CATCH_CHECK_THAT(r.out, Catch::Matchers::Contains("train") && Catch::Matchers::Contains("inspect"));
  Result t = run_causal("train --help");
  CATCH_CHECK(t.code == 0);
  CATCH_CHECK_THAT(t.out, Catch::Matchers::Contains("--set") && Catch::Matchers::Contains("--print-config"));
  Result i = run_causal("inspect --help");
  CATCH_CHECK(i.code == 0);
  CATCH_CHECK_THAT(i.out, Catch::Matchers::Contains("--context") && Catch::Matchers::Contains("--dtype"));
}

CATCH_TEST_CASE("causal --version names LibTorch's version, CPU or CUDA, and a known BLAS", "[unit][cli]") {
  Result r = run_causal("--version");
  CATCH_CHECK(r.code == 0);
  CATCH_INFO(r.out);
  CATCH_CHECK(std::regex_search(
      r.out,
      std::regex(
          R"(^causal \S+ \(LibTorch [0-9]+\.[0-9]+\.[0-9]+, (CPU|CUDA [0-9]+\.[0-9]+), BLAS (MKL|OpenBLAS)\))")));
}

CATCH_TEST_CASE("usage errors exit 2", "[unit][cli]") {
  CATCH_CHECK(run_causal("").code == 2);
  CATCH_CHECK(run_causal("train").code == 2);  // --config is required
  CATCH_CHECK(run_causal("frobnicate").code == 2);
}

CATCH_TEST_CASE("config errors exit 2 with one line naming the file and key", "[unit][cli]") {
  Result missing = run_causal("train --config configs/does-not-exist.json");
  CATCH_CHECK(missing.code == 2);
  CATCH_CHECK_THAT(missing.err, Catch::Matchers::Contains("configs/does-not-exist.json"));
  CATCH_CHECK(line_count(missing.err) == 1);

  Result bad = run_causal("train --config configs/retrieval.json --set model.d_model=30");
  CATCH_CHECK(bad.code == 2);
  CATCH_CHECK_THAT(bad.err, Catch::Matchers::Contains("model.d_model"));
  CATCH_CHECK(line_count(bad.err) == 1);

  Result typo = run_causal("train --config configs/retrieval.json --set model.d_modle=64");
  CATCH_CHECK(typo.code == 2);
  CATCH_CHECK_THAT(typo.err, Catch::Matchers::Contains("d_model"));
}

CATCH_TEST_CASE("train --print-config prints the resolved config and trains nothing", "[unit][cli]") {
  Result r = run_causal("train --config configs/retrieval.json --print-config --set model.d_model=64");
  CATCH_REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CATCH_CHECK(j["model"]["d_model"] == 64);
  CATCH_CHECK(j["model"]["n_kv_heads"] == 4);  // resolved from n_heads
  CATCH_CHECK(j["train"]["steps"] == 320);
}

CATCH_TEST_CASE("inspect --json reports the documented KV-cache example", "[unit][cli]") {
  const fs::path dir = scratch("inspect");
  fs::create_directories(dir);
  std::ofstream(dir / "m.json") << R"({"model": {"d_model": 4096, "n_layers": 32, "n_heads": 32,
      "n_kv_heads": 8, "max_seq_len": 4096}})";
  Result r =
      run_causal("inspect --config " + (dir / "m.json").string() + " --context 4096 --dtype bf16 --json");
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(r.out, Catch::Matchers::Contains("536870912"));
  fs::remove_all(dir);
}

// A finished run folder is never written into again: running the same command reports the finished
// run, and --resume never refuses the folder before touching it.
CATCH_TEST_CASE("train writes a run folder and never overwrites it", "[unit][cli]") {
  const fs::path dir = scratch("run");
  const std::string args =
      "train --config configs/retrieval.json --set train.steps=3 --set train.log_every=1 --run-dir " +
      dir.string();
  Result first = run_causal(args);
  CATCH_REQUIRE(first.code == 0);
  CATCH_CHECK_THAT(first.out, Catch::Matchers::Contains("test accuracy"));
  const std::string results = slurp(dir / "results.json");
  const std::string metrics = slurp(dir / "metrics.jsonl");
  CATCH_CHECK(nlohmann::json::parse(results)["steps"] == 3);
  CATCH_CHECK(line_count(metrics) == 4);  // 3 train rows + the final eval row
  Result again = run_causal(args);
  CATCH_CHECK(again.code == 0);
  CATCH_CHECK_THAT(again.err, Catch::Matchers::Contains("already finished"));
  Result never = run_causal(args + " --resume never");
  CATCH_CHECK(never.code == 2);
  CATCH_CHECK_THAT(never.err, Catch::Matchers::Contains(dir.string()));
  CATCH_CHECK(slurp(dir / "results.json") == results);
  CATCH_CHECK(slurp(dir / "metrics.jsonl") == metrics);
  fs::remove_all(dir);
}

// The help a user reads points only at documents the repository has.
CATCH_TEST_CASE("the help of every command points only at docs that exist", "[unit][cli]") {
  const std::regex doc(R"(docs/[a-z-]+\.md)");
  for (const char* command : {"", "train", "inspect", "eval", "generate", "report", "data", "data encode",
                              "data inspect", "bench", "sweep"}) {
    const Result r = run_causal(std::string(command) + " --help");
    CATCH_INFO("causal " << command << " --help");
    CATCH_CHECK(r.code == 0);
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), doc), end; it != end; ++it) {
      CATCH_INFO(it->str());
      CATCH_CHECK(fs::exists(fs::path(CAUSAL_SOURCE_DIR) / it->str()));
    }
  }
}

// Parse errors read like every other error: one line, "causal: error:", exit 2, and where to read on.
CATCH_TEST_CASE("command-line parse errors are one line naming the help to read", "[unit][cli]") {
  for (const char* args : {"frobnicate", "train --bogus", "generate --run x --prompt a --top-k -3",
                           "eval --run x --split train"}) {
    const Result r = run_causal(args);
    CATCH_INFO(args << " -> " << r.err);
    CATCH_CHECK(r.code == 2);
    CATCH_CHECK(line_count(r.err) == 1);
    CATCH_CHECK(r.err.rfind("causal: error: ", 0) == 0);
    CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains("--help"));
  }
}

// One check, one exit code: --val-out without --val-fraction is the encoder's data error (exit 3).
CATCH_TEST_CASE("data encode refuses --val-out without --val-fraction once, with exit 3", "[unit][cli]") {
  const fs::path dir = scratch("encode_split");
  fs::create_directories(dir);
  std::ofstream(dir / "a.txt") << "some text";
  const Result r = run_causal("data encode --input " + (dir / "a.txt").string() + " --out " +
                              (dir / "a.tok").string() + " --val-out " + (dir / "v.tok").string());
  CATCH_CHECK(r.code == 3);
  CATCH_CHECK(line_count(r.err) == 1);
  CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains("--val-fraction"));
  CATCH_CHECK(!fs::exists(dir / "a.tok"));
  fs::remove_all(dir);
}

// bench --json is a contract for scripts (tools/bench-compare): exactly these keys, with sane values.
CATCH_TEST_CASE("bench --json prints exactly the documented figures", "[unit][cli]") {
  const Result r = run_causal("bench --config configs/retrieval.json --steps 3 --warmup 1 --json");
  CATCH_REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::vector<std::string> keys;
  for (const auto& item : j.items()) keys.push_back(item.key());
  std::sort(keys.begin(), keys.end());
  CATCH_CHECK(keys == std::vector<std::string>{"achieved_gflops", "backward_ms", "forward_ms",
                                               "graph_failure", "graph_replays", "matmul_peak_gflops", "mfu",
                                               "ms_per_step", "optimizer_ms", "peak_device_mib",
                                               "peak_rss_mib", "threads", "tokens_per_s"});
  CATCH_CHECK(j["graph_replays"].get<int64_t>() == 0);  // the CPU has no CUDA graph
  CATCH_CHECK(j["tokens_per_s"].get<double>() > 0);
  CATCH_CHECK(j["peak_device_mib"].get<double>() == 0.0);  // the CPU has no device allocator
  for (const char* phase : {"ms_per_step", "forward_ms", "backward_ms", "optimizer_ms"}) {
    CATCH_INFO(phase);
    CATCH_CHECK(j[phase].get<double>() > 0);
  }
  CATCH_CHECK(j["mfu"].get<double>() > 0);
  CATCH_CHECK(j["mfu"].get<double>() < 1);
  CATCH_CHECK(j["matmul_peak_gflops"].get<double>() > 1);
}

// bench --suggest times real variants and names one of them (or none); it writes nothing.
CATCH_TEST_CASE("bench --suggest times every variant and suggests one of them or the config", "[unit][cli]") {
  const Result r = run_causal("bench --config configs/retrieval.json --suggest --steps 2 --warmup 1 --json");
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CATCH_REQUIRE(j["variants"].size() == 6);
  CATCH_CHECK(j["variants"][0]["overrides"].empty());
  std::vector<nlohmann::json> candidates;
  for (const auto& v : j["variants"]) {
    CATCH_INFO(v.dump());
    CATCH_CHECK(v["tokens_per_s"].size() == 2);  // two rounds
    CATCH_CHECK(v["median_tokens_per_s"].get<double>() > 0);
    candidates.push_back(v["overrides"]);
  }
  CATCH_CHECK(std::find(candidates.begin(), candidates.end(), j["suggested"]["overrides"]) !=
              candidates.end());
  CATCH_CHECK(j["suggested"]["ratio"].get<double>() >= (j["suggested"]["overrides"].empty() ? 1.0 : 1.05));
  const Result both = run_causal("bench --config configs/retrieval.json --suggest --matmul-peak");
  CATCH_CHECK(both.code == 2);
}

// bench --kernels on the CPU profiles the ATen operators of the extra steps (LibTorch 2.x; 1.13 has no Kineto
// profiler here, a usage error before any step): self times that add up to the busy time, sorted into kinds,
// the products among them. With --suggest it is a usage error.
CATCH_TEST_CASE(
    "bench --kernels on the CPU gives ATen operators' self times by kind, and exits 2 with --suggest",
    "[unit][cli]") {
  const Result cpu =
      run_causal("bench --config configs/retrieval.json --steps 2 --warmup 1 --kernels 2 --json");
  if (run_causal("--version").out.find("LibTorch 1.") != std::string::npos) {
    CATCH_CHECK(cpu.code == 2);
    CATCH_CHECK(cpu.err.find("--kernels") != std::string::npos);
    CATCH_CHECK(cpu.out.empty());
  } else {
    CATCH_INFO(cpu.err);
    CATCH_REQUIRE(cpu.code == 0);
    const nlohmann::json k = nlohmann::json::parse(cpu.out).at("kernels");
    CATCH_CHECK(k.at("device") == "cpu");
    CATCH_CHECK(k.at("steps") == 2);
    const double busy = k.at("busy_ms").get<double>();
    CATCH_CHECK(busy > 0.0);
    CATCH_CHECK(busy <= k.at("wall_ms").get<double>());  // self times do not count nested time twice
    double kinds = 0.0;
    for (const auto& [kind, ms] : k.at("kind_ms").items()) kinds += ms.get<double>();
    CATCH_CHECK(std::abs(kinds - busy) <= 1e-6 * busy);
    CATCH_CHECK(k.at("kind_ms").at("matmul").get<double>() > 0.0);
    bool product = false;
    for (const nlohmann::json& op : k.at("kernels"))
      product = product || (op.at("name") == "aten::mm" && op.at("kind") == "matmul");
    CATCH_CHECK(product);
  }
  const Result suggest = run_causal("bench --config configs/retrieval.json --kernels 2 --suggest");
  CATCH_CHECK(suggest.code == 2);
  CATCH_CHECK(suggest.err.find("--kernels") != std::string::npos);
}

// A command that fails prints its one error line and nothing on stdout that looks like success.
CATCH_TEST_CASE("report that cannot be written says only why, with exit 2", "[unit][cli]") {
  const fs::path dir = scratch("report_blocked");
  fs::create_directories(dir / "report.html" / "in-the-way");
  std::ofstream(dir / "config.json")
      << R"({"name": "x", "model": {"d_model": 32, "n_layers": 1, "n_heads": 4},
    "data": {"kind": "text", "train": "a.tok", "val": "b.tok", "seq_len": 16}})";
  const Result r = run_causal("report --run " + dir.string());
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK(r.out.empty());
  CATCH_CHECK(line_count(r.err) == 1);
  CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains("report.html"));
  fs::remove_all(dir);
}

// A model that cannot fit is refused before any allocation with its estimate (it used to reach LibTorch's
// allocator and exit 1 with a stack trace); nothing is written.
CATCH_TEST_CASE("a model too large for memory is refused with its estimate, exit 2", "[unit][cli]") {
  const fs::path dir = scratch("too_large");
  const std::string sizes =
      " --config configs/retrieval.json --set model.d_model=262144 --set model.n_layers=64";
  for (const std::string& args : {"train" + sizes + " --run-dir " + dir.string(), "bench" + sizes}) {
    const Result r = run_causal(args);
    CATCH_INFO(args << " -> " << r.err);
    CATCH_CHECK(r.code == 2);
    CATCH_CHECK(line_count(r.err) == 1);
    CATCH_CHECK(r.err.rfind("causal: error: ", 0) == 0);
    for (const char* name : {"model.d_model", "model.n_layers", "train.batch_size", "GiB", "262144"})
      CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains(name));
  }
  CATCH_CHECK(!fs::exists(dir));
}

// Cost figures are int64: sizes whose figures would overflow are refused instead of printing garbage.
CATCH_TEST_CASE("inspect refuses sizes whose cost figures overflow 64-bit integers", "[unit][cli]") {
  const Result r = run_causal("inspect --config configs/retrieval.json --set model.d_model=4294967296");
  CATCH_INFO(r.out << r.err);
  CATCH_CHECK(r.code == 2);
  CATCH_CHECK(line_count(r.err) == 1);
  CATCH_CHECK_THAT(r.err,
                   Catch::Matchers::Contains("--set model.d_model") && Catch::Matchers::Contains("64-bit"));
}

// tools/bench-pytorch takes these figures from here instead of working them out again, so each one is checked
// against an independent source: `inspect --json` for the FLOPs, the parameter names for the groups, the
// schedule's closed form for the lr.
CATCH_TEST_CASE(
    "bench --describe prints inspect's FLOPs, each parameter's AdamW group and the lr of each step",
    "[unit][cli][bench]") {
  const std::string sets =
      " --set train.steps=12 --set train.schedule.kind=cosine --set train.schedule.warmup_steps=3"
      " --set train.optimizer.decay_norms_and_embeddings=false --set model.position=learned";
  const Result r = run_causal("bench --describe --config configs/retrieval.json" + sets);
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  const nlohmann::json d = nlohmann::json::parse(r.out);
  const int64_t seq = d["sequence_length"].get<int64_t>();
  CATCH_CHECK(seq == 5);  // 4 context records and the query (configs/retrieval.json)
  const Result inspect = run_causal("inspect --config configs/retrieval.json" + sets + " --context " +
                                    std::to_string(seq) + " --batch 64 --json");
  CATCH_REQUIRE(inspect.code == 0);
  CATCH_CHECK(d["inspect"] == nlohmann::json::parse(inspect.out));
  CATCH_CHECK(d["inspect"]["flops_per_token"]["training_causal"].get<int64_t>() > 0);

  // Matrices decay (group 0, weight_decay 0.01); biases, norms, embeddings and positions do not (group 1).
  int64_t decayed = 0, kept = 0;
  for (const nlohmann::json& p : d["parameters"]) {
    const std::string name = p["name"];
    CATCH_INFO(name);
    const bool no_decay = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    const bool exempt = no_decay || name.find("norm.") != std::string::npos || name.rfind("embed.", 0) == 0 ||
                        name.rfind("pos_embed.", 0) == 0;
    CATCH_CHECK(p["group"] == (exempt ? 1 : 0));
    CATCH_CHECK(p["weight_decay"].get<double>() == (exempt ? 0.0 : 0.01));
    CATCH_CHECK(p["shape"].is_array());
    (exempt ? kept : decayed) += 1;
  }
  CATCH_CHECK(decayed > 0);  // guards against a list with one kind only
  CATCH_CHECK(kept > 0);

  // Warmup to the peak 0.005 at step 2, then cosine to 0.1 x peak at the last step (11).
  const std::vector<double> lr = d["lr"];
  CATCH_REQUIRE(lr.size() == 12);
  CATCH_CHECK(lr[0] == Approx(0.005 / 3));
  CATCH_CHECK(lr[2] == Approx(0.005));
  CATCH_CHECK(lr[11] == Approx(0.0005));
  CATCH_CHECK(lr[7] == Approx(0.0005 + 0.0045 * 0.5 * (1 + std::cos(M_PI * 4.0 / 8.0))));
}
