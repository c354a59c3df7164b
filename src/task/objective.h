// The training objective shared by training and evaluation: batch -> model inputs, summed token loss.
#pragma once

#include <ATen/core/Tensor.h>

#include "config/train_config.h"
#include "data/batch.h"
#include "model/transformer.h"

namespace causal {

ModelInputs model_inputs(const Batch& batch);

// Cross-entropy summed over positions whose label is not kIgnoreLabel (0 when there are none, never NaN).
// Callers divide by the valid-token count of the whole optimizer step, so accumulation is not a mean of
// means.
at::Tensor loss_sum(const at::Tensor& logits /*(B,T,V)*/, const at::Tensor& labels /*(B,T)*/);

// Bytes of float32 logits one chunk of train.loss_kernel "chunked" holds when train.loss_chunk_rows is 0;
// "auto" chunks a micro-batch whose logits would pass it (docs/model.md#chunked-loss).
inline constexpr int64_t kLossChunkBytes = int64_t{256} << 20;

// The training loss of one micro-batch, as train.loss_kernel computes it.
struct TrainingLoss {
  at::Tensor sum;            // () loss_sum()'s value, the graph to backward through attached
  at::Tensor max_abs_logit;  // () when asked for, else undefined
};
TrainingLoss training_loss_sum(Transformer& model, const Batch& batch, const TrainConfig& train,
                               bool max_abs_logit);

}  // namespace causal
