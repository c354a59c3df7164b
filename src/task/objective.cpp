// Objective implementation.
#include "task/objective.h"

#include <torch/nn/functional/loss.h>

namespace causal {

ModelInputs model_inputs(const Batch& batch) {
  ModelInputs in;
  in.tokens = batch.tokens;
  in.positions = batch.positions;
  in.segment_ids = batch.segment_ids;
  // All true, it masks nothing: without it the model may use its mask for the sequence's shape alone.
  in.key_valid = batch.unpadded ? at::Tensor() : batch.key_valid;
  return in;
}

at::Tensor loss_sum(const at::Tensor& logits, const at::Tensor& labels) {
  const int64_t vocab = logits.size(-1);
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits.reshape({-1, vocab}), labels.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(kIgnoreLabel).reduction(torch::kSum));
}

}  // namespace causal
