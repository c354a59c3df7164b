// Checkpoint contents: weights and AdamW state round-trip exactly, a model of another shape is refused,
// generators and data sources continue their exact sequences, and resumable metrics are trimmed.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/rng_state.h"
#include "data/retrieval_data.h"
#include "data/retrieval_sampler.h"
#include "model/transformer.h"
#include "run/run_folder.h"
#include "support/scratch_dir.h"
#include "task/objective.h"
#include "train/optimizer.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

RunConfig tiny_config(int64_t d_model) {
  RunConfig c;
  c.model.inputs = {InputField{"token", 13}};
  c.model.output_vocab = 13;
  c.model.d_model = d_model;
  c.model.n_layers = 2;
  c.model.n_heads = 2;
  c.model.max_seq_len = 8;
  c.model.position = PositionKind::kRope;
  resolve(c);
  return c;
}

// One AdamW step on a fixed random batch.
void train_step(Transformer& model, torch::optim::Optimizer& optimizer, uint64_t seed) {
  torch::manual_seed(seed);
  Batch b;
  b.tokens = torch::randint(13, {3, 8}, torch::kLong);
  b.labels = torch::randint(13, {3, 8}, torch::kLong);
  optimizer.zero_grad();
  loss_sum(model->forward(model_inputs(b)).logits, b.labels).backward();
  optimizer.step();
}

bool same_parameters(Transformer& a, Transformer& b) {
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa) {
    if (!torch::equal(item.value(), pb[item.key()])) return false;
  }
  return pa.size() == pb.size();
}

TrainingState some_state(int64_t step) {
  TrainingState s;
  s.step = step;
  s.tokens_seen = 123;
  s.data = {{"cursor", 1}};
  s.data_identity = {{"tokenizer", "bytes"}};
  s.rng = capture_global_rng(c10::Device(c10::kCPU));
  return s;
}

}  // namespace

CATCH_TEST_CASE("checkpoint: weights and AdamW state round-trip and the next step is identical",
                "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_state");
  const RunConfig config = tiny_config(16);
  torch::manual_seed(1);
  Transformer a(config.model);
  auto opt_a = make_adamw(*a, config.train.optimizer);
  for (uint64_t s = 0; s < 3; ++s) train_step(a, *opt_a, 100 + s);
  const fs::path dir = save_checkpoint(scratch.path, some_state(3), *a, *opt_a, config_to_json(config));
  CATCH_CHECK(dir.filename() == "step_00000003");
  for (const char* f :
       {"model.safetensors", "optimizer.safetensors", "state.json", "config.json", "manifest.json"})
    CATCH_CHECK(fs::is_regular_file(dir / f));

  torch::manual_seed(2);  // different init: everything must come from the checkpoint
  Transformer b(config.model);
  auto opt_b = make_adamw(*b, config.train.optimizer);
  CATCH_REQUIRE_FALSE(same_parameters(a, b));
  const CheckpointInfo info = read_checkpoint(dir);
  CATCH_CHECK(info.state.step == 3);
  CATCH_CHECK(info.state.tokens_seen == 123);
  CATCH_CHECK(info.config == config_to_json(config));
  load_model_weights(dir, *b);
  load_optimizer_state(dir, *b, *opt_b);
  CATCH_CHECK(same_parameters(a, b));
  train_step(a, *opt_a, 200);
  train_step(b, *opt_b, 200);
  CATCH_CHECK(same_parameters(a, b));  // moments and step counts (bias correction) were restored
}

CATCH_TEST_CASE("checkpoint: a model of another shape is refused, naming the tensor", "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_state");
  const RunConfig config = tiny_config(16);
  Transformer a(config.model);
  auto opt = make_adamw(*a, config.train.optimizer);
  const fs::path dir = save_checkpoint(scratch.path, some_state(1), *a, *opt, config_to_json(config));
  Transformer wider(tiny_config(32).model);
  CATCH_CHECK_THROWS_WITH(load_model_weights(dir, *wider), Catch::Matchers::Contains("embed.token.weight") &&
                                                               Catch::Matchers::Contains("[13,16]"));
  RunConfig deeper = tiny_config(16);
  deeper.model.n_layers = 3;
  Transformer three(deeper.model);
  std::vector<at::Tensor> before;
  for (const auto& p : three->parameters()) before.push_back(p.clone());
  CATCH_CHECK_THROWS_WITH(load_model_weights(dir, *three), Catch::Matchers::Contains("blocks.2."));
  size_t i = 0;  // the refused load copied nothing, not even the tensors that matched
  for (const auto& p : three->parameters()) CATCH_CHECK(torch::equal(p, before[i++]));
  RunConfig shallower = tiny_config(16);
  shallower.model.n_layers = 1;
  Transformer one(shallower.model);
  CATCH_CHECK_THROWS_WITH(load_model_weights(dir, *one),
                          Catch::Matchers::Contains("belongs to no parameter"));
}

CATCH_TEST_CASE("checkpoint: config_differences lists every changed leaf of the chosen sections",
                "[unit][checkpoint]") {
  RunConfig a = tiny_config(16), b = tiny_config(32);
  b.model.n_layers = 3;
  b.train.steps = 999;  // not in the compared sections
  const auto diffs = config_differences(config_to_json(a), config_to_json(b), {"model", "data", "seed"});
  CATCH_REQUIRE(diffs.size() == 3);  // ffn_hidden follows d_model (resolved 4d)
  CATCH_CHECK(diffs[0] == "model.d_model: checkpoint 16, requested 32");
  CATCH_CHECK(diffs[1] == "model.ffn_hidden: checkpoint 64, requested 128");
  CATCH_CHECK(diffs[2] == "model.n_layers: checkpoint 2, requested 3");
  CATCH_CHECK(config_differences(config_to_json(a), config_to_json(a), {"model", "data", "seed"}).empty());
}

CATCH_TEST_CASE("checkpoint: generator state text restores the exact sequence", "[unit][checkpoint]") {
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(7);
  at::randn({5}, g);
  const std::string saved = generator_state_hex(g);
  const at::Tensor expected = at::randn({100}, g);
  at::Generator other = at::make_generator<at::CPUGeneratorImpl>(99);
  restore_generator_state(other, saved, "test");
  CATCH_CHECK(torch::equal(at::randn({100}, other), expected));
  CATCH_CHECK_THROWS_WITH(restore_generator_state(other, "zz", "test"), Catch::Matchers::Contains("hex"));
  CATCH_CHECK_THROWS_WITH(restore_generator_state(other, "abcd", "test"),
                          Catch::Matchers::Contains("refused"));
}

CATCH_TEST_CASE("checkpoint: the retrieval sampler continues its row draws after restore",
                "[unit][checkpoint]") {
  DataConfig data;
  data.kind = DataKind::kRetrieval;
  data.train_examples = 64;
  data.test_examples = 16;
  const RetrievalData built = build_retrieval_data(data);
  RetrievalSampler a(built.train, 4, 11);
  a.next();
  a.next();
  const nlohmann::json state = a.state();
  const Batch expected = a.next();
  RetrievalSampler b(built.train, 4, 12);
  b.restore(state);
  CATCH_CHECK(torch::equal(b.next().tokens, expected.tokens));
  CATCH_CHECK_THROWS(b.restore(nlohmann::json{{"cursor", 3}}));
}

CATCH_TEST_CASE("checkpoint: metrics rows after the resumed step are dropped, torn lines too",
                "[unit][checkpoint]") {
  testing::ScratchDir scratch("checkpoint_state");
  const fs::path dir = scratch.path / "run";
  {
    auto folder = RunFolder::create(dir.string(), "", "x");
    for (int step = 1; step <= 5; ++step) folder->append_metrics({{"kind", "train"}, {"step", step}});
  }
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"kind\":\"train\",\"st";  // crash mid-write
  auto folder = RunFolder::open_existing(dir);
  folder->truncate_metrics_after(3);
  folder->append_metrics({{"kind", "train"}, {"step", 4}});
  std::ifstream in(dir / "metrics.jsonl");
  std::vector<int> steps;
  for (std::string line; std::getline(in, line);)
    steps.push_back(nlohmann::json::parse(line)["step"].get<int>());
  CATCH_CHECK(steps == std::vector<int>{1, 2, 3, 4});
  CATCH_CHECK_THROWS_AS(RunFolder::open_existing(dir), RunFolderError);  // still locked by `folder`
}

CATCH_TEST_CASE(
    "checkpoint: state.json's optimizer_kernel round-trips, and an unknown one is a CheckpointError",
    "[unit][checkpoint]") {
  TrainingState state = some_state(2);
  CATCH_CHECK_FALSE(TrainingState::from_json(state.to_json(), "state.json").optimizer_kernel.has_value());
  state.optimizer_kernel = "fused";
  CATCH_CHECK(TrainingState::from_json(state.to_json(), "state.json").optimizer_kernel ==
              std::string("fused"));
  nlohmann::json json = state.to_json();
  json["optimizer_kernel"] = "turbo";
  CATCH_CHECK_THROWS_AS(TrainingState::from_json(json, "state.json"), CheckpointError);
}
