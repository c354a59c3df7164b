// The output head and its cross-entropy together, a chunk of rows at a time: the (rows, V) float32 logits
// of a whole micro-batch, 3.3 GB for GPT-2's vocabulary at 16 x 1024 tokens, never exist at once
// (docs/model.md#chunked-loss).
#pragma once

#include <ATen/core/Tensor.h>

namespace causal {

struct HeadLossOptions {
  int64_t chunk_rows = 1024;               // rows of hidden state whose logits exist at one time
  c10::ScalarType products = c10::kFloat;  // dtype of the head's products (bfloat16 under autocast)
  int64_t ignore_label = -100;             // rows with this label are outside the loss
  bool max_abs_logit = false;              // also return the largest |logit| (diagnostics)
};

struct HeadLoss {
  at::Tensor sum;            // () float32: cross-entropy summed over the rows in the loss
  at::Tensor max_abs_logit;  // () float32 when asked for, else undefined
};

// hidden (N,D), weight (V,D), bias (V) or undefined, labels (N) int64. The loss equals cross-entropy (sum)
// of linear(hidden, weight, bias) cast to float32, the logits path's value up to the order of the sums.
// With gradients wanted (grad mode on and an input that requires them), each chunk's gradients are made
// as soon as its loss is, while its logits are at hand; backward only scales them by the loss's gradient.
// `padded_weight`, when defined, is the weight as the products take it (a shadow: padded_head()'s rows, in
// options.products), read in place of casting and padding `weight`; the gradient still goes to `weight`.
HeadLoss chunked_head_loss(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& labels, const HeadLossOptions& options,
                           const at::Tensor& padded_weight = at::Tensor());

// Rows per chunk that keep one chunk's float32 logits within `bytes`: a multiple of 64, at least 64.
int64_t head_loss_chunk_rows(int64_t vocab, int64_t bytes);

}  // namespace causal
