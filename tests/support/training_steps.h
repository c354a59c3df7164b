// Test helper: a few training steps of a small model on random micro-batches, for tests that compare two
// ways of taking the same steps bit for bit (an eager step and a replayed graph, weights and their shadows).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "config/model_config.h"
#include "config/train_config.h"
#include "data/batch.h"
#include "model/transformer.h"
#include "train/optimizer.h"
#include "train/step_graph.h"
#include "train/trainer.h"

namespace causal::testing {

// Micro-batches of random tokens (vocab 11), rows x 16, on `device`; a few labels outside the loss.
inline std::vector<Batch> random_micro_batches(int64_t count, int64_t rows, const c10::Device& device) {
  std::vector<Batch> out;
  for (int64_t i = 0; i < count; ++i) {
    Batch b;
    b.tokens = torch::randint(11, {rows, 16, 1}, torch::kLong);
    b.positions = torch::arange(16, torch::kLong).unsqueeze(0).expand({rows, 16}).contiguous();
    b.key_valid = torch::ones({rows, 16}, torch::kBool);
    b.labels = torch::randint(11, {rows, 16}, torch::kLong);
    b.labels.select(1, 0).fill_(kIgnoreLabel);
    out.push_back(b.to(device));
  }
  return out;
}

struct TrainedSteps {
  std::vector<double> losses;
  std::vector<torch::Tensor> weights;  // on the CPU
};

// `steps` training steps of `model` (a resolved config with vocab 11) of two micro-batches of 3 rows each,
// with `train`'s AdamW between them; through `graph` when given. The same seeds each call: the same
// initial weights, batches and dropout draws.
inline TrainedSteps train_random_steps(const ModelConfig& config, const TrainConfig& train,
                                       const c10::Device& device, int64_t steps, StepGraph* graph) {
  torch::manual_seed(21);
  Transformer model(config);
  model->to(device);
  model->train();
  auto optimizer = make_adamw(*model, train.optimizer);
  TrainedSteps run;
  torch::manual_seed(22);
  for (int64_t step = 0; step < steps; ++step) {
    const std::vector<Batch> batches = random_micro_batches(2, 3, device);
    run.losses.push_back(accumulate_gradients(model, batches, train, false, nullptr, nullptr, graph).loss);
    optimizer->step();
  }
  for (const torch::Tensor& p : model->parameters()) run.weights.push_back(p.detach().cpu());
  return run;
}

}  // namespace causal::testing
