// Run diagnostics: injected NaNs abort before any update and name the right tensor (forward and backward),
// forensics bundles replay the step, skip mode counts and gives up, spikes are flagged, per-layer gradient
// norms add up, and the metrics schema holds on a real run.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/forensics_bundle.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "review/checkpoint_eval.h"
#include "run/train_run.h"
#include "support/cli.h"
#include "support/metrics_rows.h"
#include "support/scratch_dir.h"
#include "support/tolerance.h"
#include "task/objective.h"
#include "train/diagnostics.h"
#include "train/replay.h"
#include "train/spike_detector.h"
#include "train/trainer.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

RunConfig retrieval(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> overrides = {"train.steps=20", "train.log_every=1", "threads=1",
                                        "model.n_layers=2", "model.dropout=0.1"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json", overrides);
}

nlohmann::json run(const RunConfig& config, const fs::path& dir, const std::string& fault = "",
                   int64_t stop_at = 0) {
  TrainRequest request;
  request.start.run_dir = dir.string();
  request.print_table = false;
  request.inject_fault = fault;
  request.stop_at_step = stop_at;
  return train_run(config, request).results;
}

// The NonFiniteError message of a run that must abort.
std::string abort_message(const RunConfig& config, const fs::path& dir, const std::string& fault) {
  try {
    run(config, dir, fault);
  } catch (const NonFiniteError& e) {
    return e.what();
  }
  return "(no NonFiniteError)";
}

bool same_tensors(const fs::path& a, const fs::path& b) {
  const NamedTensors x = load_safetensors(a.string()), y = load_safetensors(b.string());
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first || !torch::equal(x[i].second, y[i].second)) return false;
  }
  return true;
}

}  // namespace

CATCH_TEST_CASE("diagnostics: a NaN activation aborts before any update and names the sub-layer",
                "[e2e][diagnostics]") {
  testing::ScratchDir scratch("diag_activation");
  const RunConfig config = retrieval();
  const std::string message = abort_message(config, scratch.path / "run", "activation:blocks.1.ffn@3");
  CATCH_CHECK_THAT(message, Catch::Matchers::Contains("step 3: non-finite loss") &&
                                Catch::Matchers::Contains("first non-finite activation in forward order: "
                                                          "blocks.1.ffn (micro-batch 0)") &&
                                Catch::Matchers::Contains("no update was applied"));
  // The bundle holds the weights and AdamW state the step started from: exactly those after step 2.
  run(config, scratch.path / "reference", "", 2);
  const fs::path bundle = scratch.path / "run" / "forensics" / checkpoint_name(3);
  const fs::path step2 = scratch.path / "reference" / "checkpoints" / checkpoint_name(2);
  CATCH_CHECK(same_tensors(bundle / "model.safetensors", step2 / "model.safetensors"));
  CATCH_CHECK(same_tensors(bundle / "optimizer.safetensors", step2 / "optimizer.safetensors"));
  // Replaying the bundle recomputes the same verdict.
  const ReplayResult replay = replay_step(bundle);
  CATCH_CHECK_FALSE(replay.outcome.finite);
  CATCH_CHECK_THAT(message, Catch::Matchers::Contains(replay.outcome.nonfinite_cause));
  CATCH_CHECK(replay.original_message + "; forensics" ==
              message.substr(0, replay.original_message.size() + 11));
}

CATCH_TEST_CASE("diagnostics: a NaN gradient or weight is named by its parameter", "[e2e][diagnostics]") {
  testing::ScratchDir scratch("diag_backward");
  const RunConfig config = retrieval();
  CATCH_CHECK_THAT(abort_message(config, scratch.path / "grad", "gradient:blocks.0.attn.q_proj.weight@4"),
                   Catch::Matchers::Contains("step 4: non-finite gradient norm") &&
                       Catch::Matchers::Contains("activations finite; first non-finite gradient: "
                                                 "blocks.0.attn.q_proj.weight"));
  CATCH_CHECK_THAT(
      abort_message(config, scratch.path / "weight", "weight:blocks.1.attn.v_proj.weight@2"),
      Catch::Matchers::Contains("step 2: non-finite loss") &&
          Catch::Matchers::Contains("parameter blocks.1.attn.v_proj.weight holds a non-finite value"));
  CATCH_CHECK_THROWS_AS(run(config, scratch.path / "typo", "weight:blocks.9.nothing@2"), UsageError);
}

CATCH_TEST_CASE("diagnostics: skip mode counts skipped steps, continues, and gives up after N in a row",
                "[e2e][diagnostics]") {
  testing::ScratchDir scratch("diag_skip");
  const nlohmann::json results =
      run(retrieval({"train.nonfinite=skip"}), scratch.path / "once", "activation:blocks.0.attn@5");
  CATCH_CHECK(results["skipped_steps"] == 1);
  CATCH_CHECK(results["steps"] == 20);
  const auto rows = testing::metrics_rows(scratch.path / "once", "train");
  CATCH_CHECK(rows[4]["step"] == 5);
  CATCH_CHECK(rows[4]["finite"] == false);
  CATCH_CHECK(rows[5]["finite"] == true);
  CATCH_CHECK(rows.back()["skipped_steps"] == 1);
  // A poisoned weight stays poisoned: every step after it is skipped until the limit aborts the run.
  const std::string message = abort_message(
      retrieval({"train.nonfinite=skip", "train.max_consecutive_skips=3", "train.checkpoint_every=7"}),
      scratch.path / "always", "weight:head.weight@6");
  CATCH_CHECK_THAT(message, Catch::Matchers::Contains("step 8:") &&
                                Catch::Matchers::Contains("3 consecutive steps skipped"));
  // Step 7 was due for a checkpoint, but a model holding NaN is never checkpointed.
  CATCH_CHECK(fs::exists(scratch.path / "always" / "forensics" / checkpoint_name(8)));
  CATCH_CHECK_FALSE(fs::exists(scratch.path / "always" / "checkpoints" / checkpoint_name(7)));
}

CATCH_TEST_CASE("diagnostics: the spike detector fires on a spike and not on a smooth noisy run",
                "[unit][diagnostics]") {
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0.0, 0.02);
  SpikeDetector smooth(50, 6.0);
  int flagged = 0;
  for (int i = 0; i < 2000; ++i)
    flagged += smooth.observe(3.0 * std::exp(-i / 500.0) + 1.0 + noise(rng), 0.5 + noise(rng)).spike;
  CATCH_CHECK(flagged == 0);

  SpikeDetector a(50, 6.0), b(50, 6.0);
  for (int i = 0; i < 100; ++i) a.observe(2.0 + noise(rng), 1.0 + noise(rng));
  b.restore(a.state());  // state survives a checkpoint
  const SpikeFlags loss_spike = a.observe(4.0, 1.0);
  CATCH_CHECK(loss_spike.spike);
  CATCH_CHECK(loss_spike.loss_z > 6.0);
  const SpikeFlags same = b.observe(4.0, 1.0);
  CATCH_CHECK(same.loss_z == loss_spike.loss_z);
  CATCH_CHECK(b.observe(2.0, 10.0).grad_norm_z > 6.0);
  CATCH_CHECK_FALSE(a.observe(std::nan(""), 1.0).spike);  // non-finite steps are the health checks' job
}

CATCH_TEST_CASE("diagnostics: per-layer gradient norms combine in quadrature to the global norm",
                "[unit][diagnostics][numerics]") {
  RunConfig config = retrieval();
  for (const char* position : {"learned", "rope"}) {
    apply_override(config, std::string("model.position=") + position);
    torch::manual_seed(4);
    Transformer model(config.model);
    Batch b;
    b.tokens = torch::randint(8, {4, 5, 2}, torch::kLong);
    b.labels = torch::randint(8, {4, 5}, torch::kLong);
    accumulate_gradients(model, {b}, TrainConfig{}, false);
    const LayerValues layers = gradient_norms_by_layer(*model, config.model.n_layers);
    double squares = layers.embed * layers.embed + layers.head * layers.head;
    for (double n : layers.blocks) squares += n * n;
    CATCH_CHECK(layers.blocks.size() == 2);
    CATCH_CHECK(layers.embed > 0);
    // Two groupings of the same P squares (tolerance.h (1)); the square root halves the relative difference.
    int64_t count = 0;
    for (const auto& p : model->parameters()) count += p.numel();
    const double norm = clip_gradients(*model, 0.0);
    CATCH_CHECK(testing::scalars_close(std::sqrt(squares), norm, 0.5 * testing::reduction_bound(count, norm),
                                       "global norm"));
  }
}

CATCH_TEST_CASE("diagnostics: the metrics schema holds on a real run", "[e2e][diagnostics]") {
  testing::ScratchDir scratch("diag_schema");
  const RunConfig config = retrieval({"train.diag_every=5", "train.log_every=2"});
  run(config, scratch.path / "run");
  const auto rows = testing::metrics_rows(scratch.path / "run", "train");
  CATCH_REQUIRE(rows.size() == 13);  // step 1, even steps and every 5th: 1,2,4,5,6,8,10,12,14,15,16,18,20
  const auto number = [](const nlohmann::json& v) { return v.is_number() && std::isfinite(v.get<double>()); };
  for (const auto& row : rows) {
    CATCH_INFO(row.dump());
    for (const char* key :
         {"loss", "lr", "grad_norm", "grad_norm_after_clip", "tokens_per_s", "mfu", "tokens_per_param",
          "elapsed", "peak_rss_mib", "max_abs_logit", "loss_z", "grad_norm_z"})
      CATCH_CHECK(number(row[key]));
    for (const char* key : {"step", "valid_tokens", "tokens_seen", "skipped_steps"})
      CATCH_CHECK(row[key].is_number_integer());
    for (const char* key : {"clipped", "finite", "spike"}) CATCH_CHECK(row[key].is_boolean());
    CATCH_CHECK(row["grad_norm_after_clip"].get<double>() <= row["grad_norm"].get<double>());
    CATCH_CHECK(row["mfu"].get<double>() > 0.0);
    CATCH_CHECK(row["mfu"].get<double>() < 1.0);
    CATCH_CHECK(row["peak_rss_mib"].get<double>() > 10.0);
    CATCH_CHECK(row["act_rms"].size() == 2);
    const int64_t step = row["step"];
    const bool diagnosed = step == 1 || step % 5 == 0;
    CATCH_CHECK(row.contains("layer_grad_norm") == diagnosed);
    if (diagnosed) {
      CATCH_CHECK(row["layer_grad_norm"].size() == 2);
      CATCH_CHECK(row["update_ratio"].size() == 2);
      CATCH_CHECK(row["update_ratio"][1].get<double>() > 0.0);
      CATCH_CHECK(number(row["embed_grad_norm"]));
      CATCH_CHECK(number(row["head_grad_norm"]));
    }
  }
}

CATCH_TEST_CASE("diagnostics: --inject-fault exits 5 with one line and --replay reproduces the step",
                "[e2e][diagnostics][cli]") {
  const fs::path dir = testing::scratch("inject");
  const testing::Result r = testing::run_causal(
      "train --config configs/retrieval.json --set train.steps=10 --inject-fault activation:blocks.0.ffn@4 "
      "--run-dir " +
      dir.string());
  CATCH_CHECK(r.code == 5);
  CATCH_CHECK(testing::line_count(r.err.substr(r.err.find("causal: error:"))) == 1);
  CATCH_CHECK_THAT(r.err, Catch::Matchers::Contains("blocks.0.ffn") && Catch::Matchers::Contains("--replay"));
  const testing::Result replay =
      testing::run_causal("train --replay " + (dir / "forensics" / checkpoint_name(4)).string());
  CATCH_CHECK(replay.code == 5);
  CATCH_CHECK_THAT(replay.out,
                   Catch::Matchers::Contains("replayed:") && Catch::Matchers::Contains("blocks.0.ffn"));
  fs::remove_all(dir);
}

CATCH_TEST_CASE("diagnostics: eval probes give attention maps, entropies and one ablation per head",
                "[e2e][diagnostics]") {
  testing::ScratchDir scratch("diag_probes");
  const RunConfig config = retrieval({"train.steps=60"});
  run(config, scratch.path / "run");
  EvalRequest request;
  request.run_dir = (scratch.path / "run").string();
  request.attention = true;
  request.ablate_heads = true;
  const EvalOutcome outcome = evaluate_checkpoint(request);
  const nlohmann::json& attention = outcome.figures["attention"];
  CATCH_REQUIRE(attention["layers"].size() == 2);
  const int64_t t = static_cast<int64_t>(attention["labels"].size());
  CATCH_CHECK(attention["labels"].back().get<std::string>().find(":?") != std::string::npos);  // the query
  for (const auto& layer : attention["layers"]) {
    CATCH_REQUIRE(layer["heads"].size() == 4);
    for (const auto& head : layer["heads"]) {
      CATCH_CHECK(head["entropy"].get<double>() >= 0.0);
      CATCH_CHECK(head["entropy"].get<double>() <= head["max_entropy"].get<double>() + 1e-9);
      CATCH_REQUIRE(head["weights"].size() == static_cast<size_t>(t));
      for (int64_t q = 0; q < t; ++q) {  // causal rows of a distribution: future keys exactly 0
        if (attention["labels"][q] == "pad") continue;
        double sum = 0.0;
        for (int64_t k = 0; k < t; ++k) {
          const double w = head["weights"][q][k];
          if (k > q) CATCH_CHECK(w == 0.0);
          sum += w;
        }
        CATCH_CHECK(sum == Catch::Detail::Approx(1.0).epsilon(1e-5));
      }
    }
  }
  const nlohmann::json& ablation = outcome.figures["head_ablation"];
  CATCH_CHECK(ablation["heads"].size() == 8);
  CATCH_CHECK(ablation["baseline"]["loss"].get<double>() ==
              Catch::Detail::Approx(outcome.figures["test_loss"].get<double>()).epsilon(1e-5));
  double largest = 0.0;
  for (const auto& head : ablation["heads"]) largest = std::max(largest, head["delta_loss"].get<double>());
  CATCH_CHECK(largest > 0.0);  // a trained model relies on some head
  CATCH_CHECK_THAT(outcome.table, Catch::Matchers::Contains("head ablation"));
}
