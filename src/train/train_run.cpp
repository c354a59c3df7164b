// Wiring of a training run; the CLI's `train` command is a thin call into this.
#include "train/train_run.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <iostream>
#include <memory>

#include "config/config_io.h"
#include "data/retrieval_sampler.h"
#include "data/retrieval_task.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "eval/retrieval_eval.h"
#include "eval/text_eval.h"
#include "model/transformer.h"
#include "train/run_folder.h"
#include "train/runtime.h"
#include "train/trainer.h"

namespace causal {
namespace {

// Batch order gets its own stream so that changing the model (and its init draws) leaves it unchanged.
uint64_t batch_seed(int64_t seed) { return static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull + 0x5EEDull; }

int64_t parameter_count(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

// What differs between the tasks: where batches come from and how a model is scored.
struct Task {
  std::unique_ptr<BatchSource> source;
  std::function<double(Transformer&)> initial_loss;  // on a fixed batch, before the first step
  std::function<nlohmann::json(Transformer&)> evaluate;
  std::function<std::string(const nlohmann::json&)> table;
  std::string describe;  // one line for the log
};

struct RetrievalTask {
  RetrievalData data;
};

Task make_retrieval_task(const RunConfig& config, const c10::Device& device,
                         std::shared_ptr<RetrievalTask> owner) {
  Task task;
  const RetrievalData& data = owner->data;
  task.source =
      std::make_unique<RetrievalSampler>(data.train, config.train.batch_size, batch_seed(config.seed));
  task.initial_loss = [owner, device](Transformer& m) {
    return retrieval_fixed_batch_loss(m, owner->data, device);
  };
  task.evaluate = [owner, device](Transformer& m) {
    return evaluate_retrieval(m, owner->data, device).to_json();
  };
  task.table = format_retrieval_table;
  task.describe = std::to_string(data.train.size()) + " train / " + std::to_string(data.test.size()) +
                  " test retrieval examples";
  return task;
}

Task make_text_task(const RunConfig& config, const c10::Device& device, TokenFile train,
                    std::shared_ptr<TokenFile> val) {
  Task task;
  const TextRowOptions rows = TextRowOptions::from(config.data);
  const int64_t batch = config.train.batch_size;
  task.describe = std::to_string(train.num_tokens()) + " train / " + std::to_string(val->num_tokens()) +
                  " val tokens (" + train.tokenizer().describe() + ")";
  auto source = std::make_unique<TextBatchSource>(std::move(train), rows, batch, batch_seed(config.seed));
  const TextBatchSource* source_view = source.get();  // owned by the task, which outlives these closures' use
  task.source = std::move(source);
  task.initial_loss = [source_view, rows, batch, device](Transformer& m) {
    return text_fixed_batch_loss(m, source_view->file(), rows, batch, device);
  };
  task.evaluate = [val, rows, batch, device](Transformer& m) {
    return evaluate_text(m, *val, rows, batch, device).to_json("val_");
  };
  task.table = format_text_table;
  return task;
}

// Opens and checks everything the task needs; nothing is written until this succeeded.
Task make_task(const RunConfig& config, const c10::Device& device) {
  if (config.data.kind == DataKind::kRetrieval) {
    auto data = std::make_shared<RetrievalTask>(RetrievalTask{build_retrieval_data(config.data)});
    return make_retrieval_task(config, device, data);
  }
  TokenFile train(config.data.train);
  auto val = std::make_shared<TokenFile>(config.data.val);
  check_same_tokenizer(val->tokenizer(), config.data.val, train.tokenizer(), config.data.train);
  check_model_vocab(train.header(), config.data.train, config.model.inputs[0].vocab,
                    config.model.output_vocab);
  return make_text_task(config, device, std::move(train), val);
}

}  // namespace

nlohmann::json train_run(const RunConfig& config, const TrainRequest& request) {
  const int64_t threads = configure_threads(config.threads);
  const c10::Device device = resolve_device(config.device);
  Task task = make_task(config, device);

  auto folder = RunFolder::create(request.run_dir, request.runs_root, config.name);
  folder->write_json("config.json", config_to_json(config));
  auto& log = folder->log();

  torch::manual_seed(static_cast<uint64_t>(config.seed));
  Transformer model(config.model);
  model->to(device);
  log.info("run folder {}: {} parameters; {}; device {}, {} threads", folder->path().string(),
           parameter_count(*model), task.describe, device.str(), threads);

  nlohmann::json results;
  results["initial_loss"] = task.initial_loss(model);
  Trainer trainer(config, model, *task.source, *folder, device);
  TrainSummary summary = trainer.run([&](Transformer& m, int64_t) { return task.evaluate(m); });

  const nlohmann::json report = task.evaluate(model);
  results.update(report);
  results["steps"] = summary.steps;
  results["skipped_steps"] = summary.skipped_steps;
  results["final_train_loss"] = summary.final_loss;
  results["train_seconds"] = summary.seconds;
  results["tokens_per_s"] = summary.tokens_per_s;
  results["run_dir"] = folder->path().string();
  nlohmann::json eval_row = report;
  eval_row["kind"] = "eval";
  eval_row["step"] = summary.steps;
  folder->append_metrics(eval_row);
  folder->write_json("results.json", results);
  log.info("trained {} steps in {:.2f}s ({:.0f} tokens/s); results in {}", summary.steps, summary.seconds,
           summary.tokens_per_s, (folder->path() / "results.json").string());
  if (request.print_table) std::cout << task.table(results) << std::flush;
  return results;
}

}  // namespace causal
