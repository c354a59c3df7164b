// A checkpoint's attention weights on one example (see attention_sample.h).
#include "review/attention_sample.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "review/attention_observers.h"
#include "review/checkpoint_model.h"
#include "task/objective.h"
#include "task/task.h"

namespace causal {
namespace {

// A 1-D integer or bool tensor as int64 values.
std::vector<int64_t> row_values(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// What the mask lets query t see: key s <= t, both real positions, and the same segment when segments
// are used. Cells outside it are drawn as masked rather than as weight 0.
std::vector<bool> allowed_cells(const Batch& b) {
  const int64_t t = b.tokens.size(1);
  std::vector<bool> allowed(static_cast<size_t>(t * t), false);
  const std::vector<int64_t> ok =
      row_values(b.key_valid.defined() ? b.key_valid[0] : at::ones({t}, at::kLong));
  const std::vector<int64_t> sg =
      row_values(b.segment_ids.defined() ? b.segment_ids[0] : at::zeros({t}, at::kLong));
  for (int64_t q = 0; q < t; ++q) {
    for (int64_t k = 0; k <= q; ++k) allowed[q * t + k] = ok[q] != 0 && ok[k] != 0 && sg[q] == sg[k];
  }
  return allowed;
}

}  // namespace

AttentionSample sample_attention(const std::string& run_dir, int64_t max_text_tokens) {
  // The CPU is enough for one example and keeps a GPU run's report readable anywhere.
  CheckpointModel loaded = load_checkpoint_model(run_dir, "", {"device=cpu"});
  const RunConfig& config = loaded.config;
  AttentionSample sample;
  sample.step = loaded.checkpoint.state.step;
  sample.checkpoint = loaded.checkpoint.dir.string();

  const TaskExample example =
      make_task(config, loaded.device, TaskScope::kEvaluation)->first_example(max_text_tokens);
  const Batch& batch = example.batch;
  sample.tokens = example.labels;
  sample.input = example.description;
  if (!example.text.empty()) sample.outcome = "text: " + example.text;

  torch::NoGradGuard no_grad;
  AttentionWeights weights_of;
  ModelOutput out;
  {
    const ForwardHooks::Registration watching(loaded.model->hooks(), weights_of);
    out = loaded.model->forward(model_inputs(batch.to(loaded.device)));
  }
  TORCH_CHECK(!weights_of.layers().empty(), "[report] the model returned no attention weights");
  const int64_t t = batch.tokens.size(1);
  // (L,Hq,T,T): the first (only) example of each layer's (B,Hq,T,Tk).
  const at::Tensor weights =
      at::stack(weights_of.layers(), 0).select(1, 0).to(at::kCPU, at::kFloat).contiguous();
  TORCH_CHECK(weights.dim() == 4 && weights.size(2) == t && weights.size(3) == t,
              "[report] expected attention (L,Hq,T,T) with T=", t, ", got ", weights.sizes());
  sample.layers = weights.size(0);
  sample.heads = weights.size(1);
  sample.length = t;
  sample.weights.assign(weights.data_ptr<float>(), weights.data_ptr<float>() + weights.numel());
  sample.allowed = allowed_cells(batch);

  if (example.answer) {
    const int64_t predicted = out.logits[0][t - 1].argmax().item<int64_t>();
    const int64_t truth = *example.answer;
    sample.outcome = "model answers v" + std::to_string(predicted) + ", correct answer v" +
                     std::to_string(truth) + (predicted == truth ? " (right)" : " (wrong)");
  }
  return sample;
}

}  // namespace causal
