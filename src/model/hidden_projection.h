// The feed-forward network's output projection, with its hidden activation recomputed in backward instead
// of kept (docs/model.md#recomputed-ffn-activation).
#pragma once

#include <ATen/core/Tensor.h>

#include "config/enums.h"

namespace causal {

// linear(hidden, weight, bias), where hidden is gelu(first) for "gelu" (erf), gelu(first, "tanh") for
// "gelu_tanh" and silu(first) * second for "swiglu" (second undefined for the GELUs; first and second
// (..., H), weight (D, H), bias (D) or undefined). When the forward records gradients, hidden is not kept for
// backward: the backward computes it again from first (and second), one pointwise pass, so each layer keeps
// one (..., H) tensor fewer for a GELU and two for "swiglu". Output and gradients are the plain composition's
// bit for bit: the backward runs the same operations on the same values, under autocast too (where the
// weight's gradient returns in its own dtype, as autocast's cast returns it).
// The hidden activation itself: gelu(first) (erf or tanh as `kind` says) or silu(first) * second.
at::Tensor hidden_activation(FfnKind kind, const at::Tensor& first, const at::Tensor& second);

at::Tensor project_hidden(FfnKind kind, const at::Tensor& first, const at::Tensor& second,
                          const at::Tensor& weight, const at::Tensor& bias);

}  // namespace causal
