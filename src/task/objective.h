// The training objective shared by training and evaluation: batch -> model inputs, summed token loss.
#pragma once

#include <ATen/core/Tensor.h>

#include "data/batch.h"
#include "model/transformer.h"

namespace causal {

ModelInputs model_inputs(const Batch& batch);

// Cross-entropy summed over positions whose label is not kIgnoreLabel (0 when there are none, never NaN).
// Callers divide by the valid-token count of the whole optimizer step, so accumulation is not a mean of
// means.
at::Tensor loss_sum(const at::Tensor& logits /*(B,T,V)*/, const at::Tensor& labels /*(B,T)*/);

}  // namespace causal
