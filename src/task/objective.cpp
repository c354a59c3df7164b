// Objective implementation.
#include "task/objective.h"

#include <torch/nn/functional/loss.h>

#include "model/autocast_scope.h"
#include "model/head_loss.h"

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

TrainingLoss training_loss_sum(Transformer& model, const Batch& batch, const TrainConfig& train,
                               bool max_abs_logit) {
  const at::Tensor hidden = model->final_hidden(model_inputs(batch));  // (B,T,D)
  const int64_t rows = hidden.size(0) * hidden.size(1);
  const int64_t vocab = model->config().output_vocab;
  const int64_t chunk_rows =
      train.loss_chunk_rows > 0 ? train.loss_chunk_rows : head_loss_chunk_rows(vocab, kLossChunkBytes);
  const bool chunked = train.loss_kernel == LossKernel::kChunked ||
                       (train.loss_kernel == LossKernel::kAuto && rows > chunk_rows);
  TrainingLoss out;
  // An observer of the logits (a fault injected there) needs them made; so does a head adapter whose
  // dropout no folded weight reproduces.
  const LinearAdapterImpl* adapter = model->head_adapter();
  if (!chunked || model->hooks().watched(HookPoint::kLogits) || (adapter && !adapter->merges_exactly())) {
    const at::Tensor logits = model->logits(hidden);
    out.sum = loss_sum(logits, batch.labels);
    if (max_abs_logit) out.max_abs_logit = logits.detach().abs().max();
    return out;
  }
  HeadLossOptions options;
  options.chunk_rows = chunk_rows;
  options.products = products_dtype(model->config().autocast);
  options.ignore_label = kIgnoreLabel;
  options.max_abs_logit = max_abs_logit;
  // With an adapter the loss takes the head's weight with the adapter folded in, through which its
  // gradient reaches the adapter; the base's shadow does not hold that weight.
  const bool folded = model->head_adapter() != nullptr;
  const at::Tensor weight =
      folded ? model->head_adapter()->merged(model->head_weight()) : model->head_weight();
  const HeadLoss loss =
      chunked_head_loss(hidden.reshape({rows, hidden.size(2)}), weight, model->head_bias(),
                        batch.labels.reshape({rows}), options, folded ? at::Tensor() : model->head_shadow());
  out.sum = loss.sum;
  out.max_abs_logit = loss.max_abs_logit;
  return out;
}

}  // namespace causal
