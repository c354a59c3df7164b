// `causal bench --describe`: the figures bench uses, read from the objects bench builds.
#include "bench/bench_describe.h"

#include <torch/torch.h>

#include <map>
#include <memory>

#include "bench/inspect.h"
#include "model/transformer.h"
#include "task/task.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"

namespace causal {

nlohmann::json describe_bench(const RunConfig& config) {
  const c10::Device cpu(c10::kCPU);
  const std::unique_ptr<Task> task = make_task(config, cpu, TaskScope::kTraining);
  const InspectReport cost = inspect_model(config.model, task->sequence_length(), config.train.batch_size);
  Transformer model(config.model);
  // The groups of the optimizer itself, so that the decay each parameter gets is never worked out twice.
  const auto optimizer = make_adamw(*model, config.train.optimizer);
  std::map<const void*, std::pair<size_t, double>> group_of;  // parameter (its TensorImpl) -> group, decay
  for (size_t g = 0; g < optimizer->param_groups().size(); ++g) {
    const auto& group = optimizer->param_groups()[g];
    const double wd = static_cast<const torch::optim::AdamWOptions&>(group.options()).weight_decay();
    for (const at::Tensor& p : group.params()) group_of[p.unsafeGetTensorImpl()] = {g, wd};
  }
  nlohmann::json parameters = nlohmann::json::array();
  for (const auto& item : model->named_parameters()) {
    const auto at = group_of.find(item.value().unsafeGetTensorImpl());
    TORCH_CHECK(at != group_of.end(), "[bench] parameter ", item.key(), " is in no optimizer group");
    parameters.push_back({{"name", item.key()},
                          {"shape", item.value().sizes().vec()},
                          {"group", at->second.first},
                          {"weight_decay", at->second.second}});
  }
  nlohmann::json lr = nlohmann::json::array();
  for (int64_t step = 0; step < config.train.steps; ++step) lr.push_back(lr_at(config.train, step));
  return {{"sequence_length", task->sequence_length()},
          {"inspect", inspect_to_json(cost)},
          {"parameters", parameters},
          {"lr", lr}};
}

}  // namespace causal
