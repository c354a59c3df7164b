// The Task interface: one place answers "retrieval or text?", and every consumer (probes, the report's
// attention sample, evaluation) gets the same labels and splits from it.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "config/config_io.h"
#include "core/errors.h"
#include "support/byte_docs.h"
#include "support/scratch_dir.h"
#include "task/lab_checks.h"
#include "task/task.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

RunConfig retrieval_config() {
  return load_config(std::string(CAUSAL_SOURCE_DIR) + "/configs/retrieval.json");
}

RunConfig text_config(const fs::path& dir) {
  testing::write_byte_docs((dir / "train.tok").string(), {"a cat sat", "on the mat", "x y"});
  testing::write_byte_docs((dir / "val.tok").string(), {"the dog\tran\n"});
  RunConfig c;
  c.data.kind = DataKind::kText;
  c.data.train = (dir / "train.tok").string();
  c.data.val = (dir / "val.tok").string();
  c.data.seq_len = 16;
  c.model.max_seq_len = 16;
  c.train.batch_size = 2;
  resolve(c);
  validate(c, "test");
  return c;
}

}  // namespace

// Probes and the report label positions through the same function, so their labels agree.
CATCH_TEST_CASE("task: retrieval labels records and the query the same way everywhere", "[unit][task]") {
  const RunConfig config = retrieval_config();
  const auto task = make_task(config, torch::kCPU, TaskScope::kEvaluation);
  const TaskExample example = task->first_example(32);
  const ProbeSet probes = task->probe_set(1);
  CATCH_REQUIRE(!example.labels.empty());
  CATCH_CHECK(example.labels == probes.labels);
  CATCH_CHECK(example.labels.back().size() >= 4);
  CATCH_CHECK(example.labels.back().substr(example.labels.back().size() - 2) == ":?");  // the query
  CATCH_CHECK(example.labels.front().rfind('k', 0) == 0);
  CATCH_CHECK(example.answer.has_value());
  CATCH_CHECK(std::string(task_traits(DataKind::kRetrieval).held_out_split) == "test");
  CATCH_CHECK(!task_traits(DataKind::kRetrieval).generates_text);
}

CATCH_TEST_CASE("task: text labels bytes by name and reads only the held-out file to evaluate",
                "[unit][task]") {
  testing::ScratchDir dir("task_text");
  const RunConfig config = text_config(dir.path);
  fs::remove(config.data.train);  // evaluation must not need the training file
  const auto task = make_task(config, torch::kCPU, TaskScope::kEvaluation);
  const TaskExample example = task->first_example(6);
  CATCH_CHECK(example.labels == std::vector<std::string>{"BOS", "t", "h", "e", "\u2423", "d"});
  CATCH_CHECK(example.text == "the d");  // BOS is no byte of the text
  CATCH_CHECK(task->probe_set(4).labels.size() == 16);
  CATCH_CHECK_THROWS_AS(make_task(config, torch::kCPU, TaskScope::kTraining), DataError);
  CATCH_CHECK(std::string(task_traits(DataKind::kText).held_out_split) == "val");
}

CATCH_TEST_CASE("task: text checkpoint figures are the evaluation's without the split prefix",
                "[unit][task]") {
  testing::ScratchDir dir("task_text_figures");
  const RunConfig config = text_config(dir.path);
  const auto task = make_task(config, torch::kCPU, TaskScope::kTraining);
  const nlohmann::json evaluation = {{"val_loss", 1.5},
                                     {"val_perplexity", 4.48},
                                     {"val_bits_per_byte", 2.1},
                                     {"val_tokens", 10},
                                     {"val_bytes", 9}};
  const nlohmann::json figures = task->checkpoint_figures(evaluation);
  CATCH_CHECK(figures["loss"] == 1.5);
  CATCH_CHECK(figures["bits_per_byte"] == 2.1);
  CATCH_CHECK(figures.size() == 5);
  CATCH_CHECK(task->identity()["train_documents"] == 3);
}

// The lab's table is what every reader judges by: strict bounds, one relative to the initial loss, and no
// pass when a bound cannot be known.
CATCH_TEST_CASE("lab checks: strict bounds, one relative to the initial loss, none passed unknown",
                "[unit][task]") {
  const nlohmann::json results = {{"initial_loss", 2.0}};
  const LabCheck& loss = *find_lab_check("test_loss");
  CATCH_CHECK(lab_check_threshold(loss, results) == 0.5);
  CATCH_CHECK(lab_check_passes(loss, 0.49, results));
  CATCH_CHECK_FALSE(lab_check_passes(loss, 0.5, results));
  CATCH_CHECK_FALSE(lab_check_passes(loss, 0.1, nlohmann::json::object()));
  CATCH_CHECK(lab_check_rule(loss) == "< 0.25 x initial_loss");
  const LabCheck& accuracy = *find_lab_check("test_accuracy");
  CATCH_CHECK(lab_check_passes(accuracy, 0.91, results));
  CATCH_CHECK_FALSE(lab_check_passes(accuracy, 0.90, results));
  const LabCheck& causality = *find_lab_check("causality_max_diff");
  CATCH_CHECK(lab_check_passes(causality, 0.0, results));
  CATCH_CHECK_FALSE(lab_check_passes(causality, 1e-9, results));
  CATCH_CHECK(find_lab_check("val_loss") == nullptr);
}

CATCH_TEST_CASE("task traits: one registered per data.kind", "[unit][task]") {
  const TaskTraits& retrieval = task_traits(causal::DataKind::kRetrieval);
  CATCH_CHECK(retrieval.kind == causal::DataKind::kRetrieval);
  CATCH_CHECK(retrieval.has_lab_checks);
  CATCH_CHECK(std::string(retrieval.held_out_split) == "test");
  const TaskTraits& text = task_traits(causal::DataKind::kText);
  CATCH_CHECK(text.kind == causal::DataKind::kText);
  CATCH_CHECK(text.generates_text);
  CATCH_CHECK(text.validation_split == nullptr);
}
