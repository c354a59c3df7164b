// One CUDA kernel for the pointwise half of a chunk of the chunked loss (head_loss.h): per row of logits,
// the log-sum-exp, the loss at the label and, in place of the logits, their gradient softmax - one-hot.
// The ATen composition of the same reads and writes the chunk five times over in float32; this reads it
// twice in its own dtype. Declared without LibTorch so that nvcc compiles the kernel alone; built only
// with CAUSAL_CUDA (CAUSAL_CUDA_KERNELS is then defined for head_loss.cpp).
#pragma once

#include <cstdint>

#include "model/kernel_args.h"

namespace causal {

struct CrossEntropyRowsArgs {
  void* logits = nullptr;  // (rows, row_stride) in `dtype`; the first `vocab` columns are logits
  KernelDtype dtype = KernelDtype::kFloat;
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t row_stride = 0;           // >= vocab; columns [vocab, row_stride) are padding
  const int64_t* labels = nullptr;  // (rows); ignore_label marks a row outside the loss
  int64_t ignore_label = -100;
  float* loss = nullptr;        // (rows): lse - logit[label]; 0 outside the loss, NaN for a bad label
  float* max_abs = nullptr;     // (rows) largest |logit| (NaN when one is NaN), or null
  bool write_gradient = false;  // overwrite the row with softmax - one-hot (0 outside the loss),
                                // and its padding with 0
  void* stream = nullptr;       // cudaStream_t
};

// Returns the CUDA error code of the launch (0 for success).
int launch_cross_entropy_rows(const CrossEntropyRowsArgs& args);

}  // namespace causal
