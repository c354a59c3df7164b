// The associative-retrieval workload (docs/retrieval-lab.md): generated key/value records, loss only at
// the final query position, scored with the lab's controls on the test split.
#include <ATen/ATen.h>

#include "data/retrieval_data.h"
#include "data/retrieval_sampler.h"
#include "task/retrieval_eval.h"
#include "task/task.h"

namespace causal {
namespace {

std::vector<int64_t> values_of(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

class RetrievalTask : public Task {
 public:
  RetrievalTask(const RunConfig& config, const c10::Device& device, TaskScope scope)
      : data_(build_retrieval_data(config.data)), device_(device) {
    if (scope == TaskScope::kTraining) {
      sampler_ =
          std::make_unique<RetrievalSampler>(data_.train, config.train.batch_size, batch_seed(config.seed));
    }
  }

  std::string describe() const override {
    return std::to_string(data_.train.size()) + " train / " + std::to_string(data_.val.size()) +
           " validation / " + std::to_string(data_.test.size()) + " test retrieval examples" +
           (data_.train.length() == 1 ? " cut to their query record (data.query_only)" : "") +
           "; loss at the final (query) position of each row; periodic evaluation on validation";
  }
  nlohmann::json identity() const override {
    return {{"train_examples", data_.train.size()}, {"test_examples", data_.test.size()}};
  }
  int64_t sequence_length() const override { return data_.train.length(); }

  BatchSource& training_batches() override {
    TORCH_CHECK(sampler_, "[task] retrieval task opened for evaluation has no training batches");
    return *sampler_;
  }
  double initial_loss(Transformer& model) override {
    return retrieval_fixed_batch_loss(model, data_, device_);
  }

  // The test figures, with the validation figures (val_*) beside them for selection.
  nlohmann::json evaluate(Transformer& model) override {
    nlohmann::json figures = evaluate_retrieval(model, data_, device_).to_json();
    figures.update(evaluate_validation(model));
    return figures;
  }
  nlohmann::json evaluate_validation(Transformer& model) override {
    return evaluate_retrieval_validation(model, data_, device_).to_json();
  }
  nlohmann::json checkpoint_figures(const nlohmann::json& evaluation) const override {
    nlohmann::json figures = {
        {"loss", evaluation.contains("test_loss") ? evaluation.at("test_loss") : evaluation.at("val_loss")}};
    figures.update(evaluation);
    return figures;
  }
  std::string results_table(const nlohmann::json& results) const override {
    return format_retrieval_table(results);
  }

  // "k3:v5" for a context record, "k3:?" for the query, "pad" for left padding.
  std::vector<std::string> token_labels(const Batch& batch, int64_t row) const override {
    const std::vector<int64_t> keys = values_of(batch.tokens[row].select(1, 0));
    const std::vector<int64_t> values = values_of(batch.tokens[row].select(1, 1));
    const std::vector<int64_t> valid = values_of(batch.key_valid[row]);
    std::vector<std::string> labels;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!valid[i]) {
        labels.push_back("pad");
      } else {
        labels.push_back("k" + std::to_string(keys[i]) + ":" +
                         (values[i] == data_.mask_symbol ? "?" : "v" + std::to_string(values[i])));
      }
    }
    return labels;
  }

  // The whole test split: retrieval probes are cheap.
  ProbeSet probe_set(int64_t /*max_batches*/) const override {
    ProbeSet set;
    set.batches.push_back(data_.test.all());
    set.labels = token_labels(set.batches[0], 0);
    return set;
  }

  TaskExample first_example(int64_t /*max_positions*/) const override {
    TaskExample example;
    const at::Tensor first = at::zeros({1}, at::kLong);
    example.batch = data_.test.batch(first);
    example.labels = token_labels(example.batch, 0);
    example.answer = data_.test.answers[0].item<int64_t>();
    example.description = "first test example: the query asks for context record " +
                          std::to_string(data_.test.evidence[0].item<int64_t>()) + " (from 0), " +
                          std::to_string(data_.test.distractors[0].item<int64_t>()) + " distractor records";
    return example;
  }

 private:
  RetrievalData data_;
  c10::Device device_;
  std::unique_ptr<RetrievalSampler> sampler_;  // kTraining only; reads data_.train
};

}  // namespace

std::unique_ptr<Task> make_retrieval_task(const RunConfig& config, const c10::Device& device,
                                          TaskScope scope) {
  return std::make_unique<RetrievalTask>(config, device, scope);
}

}  // namespace causal
