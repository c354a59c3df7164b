// Parameter counting (see count_parameters.h).
#include "model/count_parameters.h"

#include <torch/torch.h>

#include <unordered_set>

namespace causal {

int64_t count_parameters(const torch::nn::Module& module) {
  std::unordered_set<const void*> seen;  // by tensor identity, so a tensor registered twice counts once
  int64_t total = 0;
  for (const torch::Tensor& p : module.parameters(/*recurse=*/true)) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) total += p.numel();
  }
  return total;
}

}  // namespace causal
