// Parameter counting (see count_parameters.h).
#include "model/count_parameters.h"

#include <torch/torch.h>

#include <unordered_set>

namespace causal {

int64_t count_parameters(const torch::nn::Module& module, bool trainable_only) {
  std::unordered_set<const void*> seen;  // by tensor identity, so a tensor registered twice counts once
  int64_t total = 0;
  for (const torch::Tensor& p : module.parameters(/*recurse=*/true)) {
    if (trainable_only && !p.requires_grad()) continue;
    if (seen.insert(p.unsafeGetTensorImpl()).second) total += p.numel();
  }
  return total;
}

torch::OrderedDict<std::string, torch::Tensor> trainable_parameters(const torch::nn::Module& module) {
  torch::OrderedDict<std::string, torch::Tensor> out;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    if (item.value().requires_grad()) out.insert(item.key(), item.value());
  return out;
}

}  // namespace causal
