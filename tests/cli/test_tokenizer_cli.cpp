// Subword and imported data through the command line: tokenizer train, encode with a model, import of
// nanoGPT tokens, "vocab": "auto", a run that stands alone (its tokenizer in the run folder and every
// checkpoint), generate printing ids when no tokenizer is known, and tokenizer mismatches (exit 3).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/sentencepiece_backend.h"
#include "io/sha256.h"
#include "support/cli.h"
#include "support/sentencepiece.h"

using namespace causal::testing;
namespace fs = std::filesystem;

namespace {

// A tiny text config over `train` and `val`, vocab from the data.
std::string write_config(const fs::path& dir, const fs::path& train, const fs::path& val) {
  const fs::path config = dir / "c.json";
  std::ofstream(config) << R"({"name": "tok", "threads": 1,
    "model": {"inputs": [{"name": "token", "vocab": "auto"}], "output_vocab": "auto", "d_model": 32,
              "n_layers": 1, "n_heads": 4, "max_seq_len": 32, "tie_embeddings": true},
    "data": {"kind": "text", "train": ")" +
                               train.string() + R"(", "val": ")" + val.string() +
                               R"(", "seq_len": 32},
    "train": {"steps": 4, "batch_size": 4, "log_every": 1, "checkpoint_every": 2}})";
  return config.string();
}

void write_u16(const fs::path& path, const std::vector<uint16_t>& ids) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), 2 * ids.size());
}

}  // namespace

CATCH_TEST_CASE("a model trained on imported tokens trains, evaluates and generates ids",
                "[e2e][cli][import]") {
  const fs::path dir = scratch("import_e2e");
  fs::create_directories(dir);
  std::vector<uint16_t> ids;
  for (int d = 0; d < 40; ++d) {
    ids.push_back(63);  // EOT, GPT-2 style before every document
    for (int i = 0; i < 20; ++i) ids.push_back(static_cast<uint16_t>((d + i) % 60));
  }
  write_u16(dir / "train.bin", ids);
  write_u16(dir / "val.bin", {ids.begin(), ids.begin() + 63});
  for (const char* split : {"train", "val"}) {
    const Result r = run_causal("data import --format nanogpt --input " + (dir / split).string() +
                                ".bin --vocab 64 --eot 63 --out " + (dir / split).string() + ".tok");
    CATCH_REQUIRE(r.code == 0);
  }
  const std::string config = write_config(dir, dir / "train.tok", dir / "val.tok");
  const Result train = run_causal("train --config " + config + " --run-dir " + (dir / "run").string());
  CATCH_REQUIRE(train.code == 0);
  const auto resolved = nlohmann::json::parse(slurp(dir / "run" / "config.json"));
  CATCH_CHECK(resolved["model"]["output_vocab"] == 64);  // "auto" recorded as the data's vocab
  CATCH_CHECK(resolved["model"]["inputs"][0]["vocab"] == 64);

  const Result eval = run_causal("eval --run " + (dir / "run").string());
  CATCH_REQUIRE(eval.code == 0);
  const auto figures = nlohmann::json::parse(slurp(dir / "run" / "eval" / "step_00000004.json"));
  CATCH_CHECK(figures.contains("loss"));
  CATCH_CHECK(figures.contains("perplexity"));
  CATCH_CHECK(!figures.contains("bits_per_byte"));  // imported ids carry no text bytes

  const Result gen = run_causal("generate --run " + (dir / "run").string() +
                                " --prompt-ids 1,2,3 --max-new-tokens 5 --temperature 0");
  CATCH_REQUIRE(gen.code == 0);
  CATCH_CHECK_THAT(gen.out, Catch::Matchers::StartsWith("1 2 3 |"));
  const Result text_prompt = run_causal("generate --run " + (dir / "run").string() + " --prompt hello");
  CATCH_CHECK(text_prompt.code == 2);
  CATCH_CHECK_THAT(text_prompt.err, Catch::Matchers::Contains("--prompt-ids"));
  fs::remove_all(dir);
}

CATCH_TEST_CASE("a BPE run keeps its tokenizer and decodes with it from the run alone",
                "[e2e][cli][tokenizer]") {
  CAUSAL_SKIP_WITHOUT_SENTENCEPIECE();
  const fs::path dir = scratch("bpe_e2e");
  fs::create_directories(dir);
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 200; ++i)
      text << "the cat number " << i % 13 << " sat on the mat.\n" << (i % 5 ? "" : "\n");
  }
  const Result tok =
      run_causal("data tokenizer train --input " + (dir / "text.txt").string() +
                 " --model-type bpe --vocab-size 290 --threads 1 --out " + (dir / "bpe.model").string());
  CATCH_REQUIRE(tok.code == 0);
  CATCH_CHECK_THAT(tok.out, Catch::Matchers::Contains("vocab 290") && Catch::Matchers::Contains("pieces"));
  const Result enc =
      run_causal("data encode --input " + (dir / "text.txt").string() + " --tokenizer " +
                 (dir / "bpe.model").string() + " --out " + (dir / "train.tok").string() + " --val-out " +
                 (dir / "val.tok").string() + " --val-fraction 0.2 --doc-separator '\\n\\n' --memory-mb 1");
  CATCH_REQUIRE(enc.code == 0);
  const std::string config = write_config(dir, dir / "train.tok", dir / "val.tok");
  CATCH_REQUIRE(run_causal("train --config " + config + " --run-dir " + (dir / "run").string()).code == 0);
  // The model file is in the run folder and in every checkpoint, listed in the manifest with its sha256.
  const std::string sha = causal::sha256_file((dir / "bpe.model").string());
  CATCH_CHECK(causal::sha256_file((dir / "run" / "tokenizer.model").string()) == sha);
  for (const char* step : {"step_00000002", "step_00000004"}) {
    const fs::path ckpt = dir / "run" / "checkpoints" / step;
    const auto manifest = nlohmann::json::parse(slurp(ckpt / "manifest.json"));
    CATCH_CHECK(manifest["files"]["tokenizer.model"]["sha256"] == sha);
  }
  const Result eval = run_causal("eval --run " + (dir / "run").string());
  CATCH_REQUIRE(eval.code == 0);
  const auto figures = nlohmann::json::parse(slurp(dir / "run" / "eval" / "step_00000004.json"));
  CATCH_CHECK(figures["bits_per_byte"].get<double>() > 0.0);
  // Generation decodes with the checkpoint's copy: the original model file is no longer needed.
  fs::remove(dir / "bpe.model");
  const Result gen = run_causal("generate --run " + (dir / "run").string() +
                                " --prompt 'the cat' --max-new-tokens 8 --temperature 0");
  CATCH_REQUIRE(gen.code == 0);
  CATCH_CHECK_THAT(gen.out, Catch::Matchers::StartsWith("the cat"));
  // A damaged copy is refused like any other checkpoint file.
  std::ofstream(dir / "run" / "checkpoints" / "step_00000004" / "tokenizer.model", std::ios::app) << "x";
  CATCH_CHECK(run_causal("generate --run " + (dir / "run").string() + " --checkpoint 4 --prompt a").code ==
              4);

  // Train and val encoded with different tokenizers: refused naming both files.
  CATCH_REQUIRE(run_causal("data encode --input " + (dir / "text.txt").string() + " --out " +
                           (dir / "bytes.tok").string())
                    .code == 0);
  const std::string mixed = write_config(dir, dir / "train.tok", dir / "bytes.tok");
  const Result bad = run_causal("train --config " + mixed + " --run-dir " + (dir / "run2").string());
  CATCH_CHECK(bad.code == 3);
  CATCH_CHECK_THAT(bad.err, Catch::Matchers::Contains("bytes.tok") &&
                                Catch::Matchers::Contains("train.tok") &&
                                Catch::Matchers::Contains("sentencepiece"));
  fs::remove_all(dir);
}
