// End to end: a byte-level model learns the bundled English sample, and its validation loss is the same
// under packed+isolated and padded layouts (and differs without isolation).
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "config/config_io.h"
#include "core/runtime.h"
#include "data/text_batches.h"
#include "data/text_encode.h"
#include "data/token_file.h"
#include "model/transformer.h"
#include "run/run_folder.h"
#include "task/text_eval.h"
#include "train/trainer.h"

using namespace causal;
namespace fs = std::filesystem;

CATCH_TEST_CASE("a small byte-level model learns the Brown sample and layouts agree on its validation loss",
                "[e2e][text]") {
  const fs::path dir = fs::temp_directory_path() / ("causal_e2e_text_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Encoded here rather than relying on tools/ having prepared data/: the test owns its inputs.
  EncodeOptions encode;
  for (const auto& entry : fs::directory_iterator(fs::path(CAUSAL_SOURCE_DIR) / "data/brown-sample")) {
    encode.inputs.push_back(entry.path().string());
  }
  std::sort(encode.inputs.begin(), encode.inputs.end());
  encode.out = (dir / "train.tok").string();
  encode.val_out = (dir / "val.tok").string();
  encode.val_fraction = 0.1;
  encode.doc_separator = "\n\n";
  encode_text_files(encode);

  RunConfig config = load_config(
      std::string(CAUSAL_SOURCE_DIR) + "/configs/text-small.json",
      {"data.train=" + encode.out, "data.val=" + encode.val_out, "model.n_layers=2", "model.d_model=64",
       "model.dropout=0.0", "train.steps=400", "train.schedule.warmup_steps=30", "train.eval_every=0"});
  // The trainer is driven directly (not through train_run) so the trained weights stay in hand. One thread:
  // ctest runs tests side by side, and two tests with a thread per core each would fight over the cores.
  configure_threads(1);
  auto folder = RunFolder::create((dir / "run").string(), "", config.name);
  TokenFile val(encode.val_out);
  TextRowOptions rows = TextRowOptions::from(config.data);
  TextBatchSource source(TokenFile(encode.out), rows, config.train.batch_size, 1);
  torch::manual_seed(static_cast<uint64_t>(config.seed));
  Transformer model(config.model);
  const TextEvalReport before = evaluate_text(model, val, rows, 16, torch::kCPU);
  Trainer(config, model, source, *folder, torch::kCPU).run(TrainProgress{}, TrainHooks{});
  const TextEvalReport after = evaluate_text(model, val, rows, 16, torch::kCPU);
  // Uniform guessing over 259 ids is 8.0 bits per byte and English byte unigrams ~4.4: learning must beat
  // both.
  CATCH_CHECK(after.bits_per_byte < 3.6);
  CATCH_CHECK(after.loss < 0.6 * before.loss);

  // Same weights, three layouts: packed+isolated and padded see the same (context, label) pairs.
  rows.layout = TextLayout::kPadded;
  const double padded = evaluate_text(model, val, rows, 16, torch::kCPU).loss;
  rows.layout = TextLayout::kPacked;
  rows.isolate_documents = false;
  const double unisolated = evaluate_text(model, val, rows, 16, torch::kCPU).loss;
  CATCH_WARN("val loss: before " << before.loss << ", after " << after.loss << " (" << after.bits_per_byte
                                 << " bits/byte); |packed - padded| = " << std::abs(after.loss - padded)
                                 << ", |packed - unisolated| = " << std::abs(after.loss - unisolated));
  CATCH_CHECK(std::abs(after.loss - padded) < 1e-5);
  CATCH_CHECK(std::abs(after.loss - unisolated) > 1e-5);
  fs::remove_all(dir);
}
