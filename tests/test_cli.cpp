// The `causal` binary as a user meets it: help, exit codes, one-line errors, run folders never overwritten.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `causal ARGS` from the source root, capturing both streams and the exit code.
Result causal(const std::string& args) {
  const fs::path tmp = fs::temp_directory_path() / ("causal_cli_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string cmd = std::string("cd ") + CAUSAL_SOURCE_DIR + " && " + CAUSAL_BINARY + " " + args +
                          " >" + (tmp / "out").string() + " 2>" + (tmp / "err").string();
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  return r;
}

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("causal_cli_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

int line_count(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

CATCH_TEST_CASE("causal --help names the commands and exits 0", "[unit][cli]") {
  Result r = causal("--help");
  CATCH_CHECK(r.code == 0);
  CATCH_CHECK_THAT(r.out, Catch::Matchers::Contains("train") && Catch::Matchers::Contains("inspect"));
  Result t = causal("train --help");
  CATCH_CHECK(t.code == 0);
  CATCH_CHECK_THAT(t.out, Catch::Matchers::Contains("--set") && Catch::Matchers::Contains("--print-config"));
  Result i = causal("inspect --help");
  CATCH_CHECK(i.code == 0);
  CATCH_CHECK_THAT(i.out, Catch::Matchers::Contains("--context") && Catch::Matchers::Contains("--dtype"));
}

CATCH_TEST_CASE("usage errors exit 2", "[unit][cli]") {
  CATCH_CHECK(causal("").code == 2);
  CATCH_CHECK(causal("train").code == 2);  // --config is required
  CATCH_CHECK(causal("frobnicate").code == 2);
}

CATCH_TEST_CASE("config errors exit 2 with one line naming the file and key", "[unit][cli]") {
  Result missing = causal("train --config configs/does-not-exist.json");
  CATCH_CHECK(missing.code == 2);
  CATCH_CHECK_THAT(missing.err, Catch::Matchers::Contains("configs/does-not-exist.json"));
  CATCH_CHECK(line_count(missing.err) == 1);

  Result bad = causal("train --config configs/retrieval.json --set model.d_model=30");
  CATCH_CHECK(bad.code == 2);
  CATCH_CHECK_THAT(bad.err, Catch::Matchers::Contains("model.d_model"));
  CATCH_CHECK(line_count(bad.err) == 1);

  Result typo = causal("train --config configs/retrieval.json --set model.d_modle=64");
  CATCH_CHECK(typo.code == 2);
  CATCH_CHECK_THAT(typo.err, Catch::Matchers::Contains("d_model"));
}

CATCH_TEST_CASE("train --print-config prints the resolved config and trains nothing", "[unit][cli]") {
  Result r = causal("train --config configs/retrieval.json --print-config --set model.d_model=64");
  CATCH_REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CATCH_CHECK(j["model"]["d_model"] == 64);
  CATCH_CHECK(j["model"]["n_kv_heads"] == 4);  // resolved from n_heads
  CATCH_CHECK(j["train"]["steps"] == 320);
}

CATCH_TEST_CASE("inspect --json reports the seed's KV-cache example", "[unit][cli]") {
  const fs::path dir = scratch("inspect");
  fs::create_directories(dir);
  std::ofstream(dir / "m.json") << R"({"model": {"d_model": 4096, "n_layers": 32, "n_heads": 32,
      "n_kv_heads": 8, "max_seq_len": 4096}})";
  Result r = causal("inspect --config " + (dir / "m.json").string() + " --context 4096 --dtype bf16 --json");
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK_THAT(r.out, Catch::Matchers::Contains("536870912"));
  fs::remove_all(dir);
}

// A finished run folder is never written into again: the second run fails before touching it.
CATCH_TEST_CASE("train writes a run folder and never overwrites it", "[unit][cli]") {
  const fs::path dir = scratch("run");
  const std::string args =
      "train --config configs/retrieval.json --set train.steps=3 --set train.log_every=1 --run-dir " +
      dir.string();
  Result first = causal(args);
  CATCH_REQUIRE(first.code == 0);
  CATCH_CHECK_THAT(first.out, Catch::Matchers::Contains("test accuracy"));
  const std::string results = slurp(dir / "results.json");
  CATCH_CHECK(nlohmann::json::parse(results)["steps"] == 3);
  CATCH_CHECK(line_count(slurp(dir / "metrics.jsonl")) == 4);  // 3 train rows + the final eval row
  Result second = causal(args);
  CATCH_CHECK(second.code == 2);
  CATCH_CHECK_THAT(second.err, Catch::Matchers::Contains(dir.string()));
  CATCH_CHECK(slurp(dir / "results.json") == results);
  fs::remove_all(dir);
}
