// The registry of workloads: one line per task kind.
#include "task/task.h"

#include <vector>

#include "core/errors.h"

namespace causal {

// Each defined in its own file (task/<name>_task.cpp).
std::unique_ptr<Task> make_retrieval_task(const RunConfig& config, const c10::Device& device,
                                          TaskScope scope);
std::unique_ptr<Task> make_text_task(const RunConfig& config, const c10::Device& device, TaskScope scope);

namespace {

struct Registration {
  TaskTraits traits;
  std::unique_ptr<Task> (*make)(const RunConfig&, const c10::Device&, TaskScope);
};

const std::vector<Registration>& registry() {
  static const std::vector<Registration> tasks = {
      // kind, held-out split, validation split, generates text, scores by context length, lab checks
      {{DataKind::kRetrieval, "test", "val", false, true, true}, make_retrieval_task},
      {{DataKind::kText, "val", nullptr, true, false, false}, make_text_task},
  };
  return tasks;
}

const Registration& registration(DataKind kind) {
  for (const Registration& r : registry()) {
    if (r.traits.kind == kind) return r;
  }
  throw ConfigError("config", "data.kind", "\"" + to_string(kind) + "\" has no registered task");
}

}  // namespace

const TaskTraits& task_traits(DataKind kind) { return registration(kind).traits; }

uint64_t batch_seed(int64_t run_seed) {
  return static_cast<uint64_t>(run_seed) * 0x9E3779B97F4A7C15ull + 0x5EEDull;
}

std::unique_ptr<Task> make_task(const RunConfig& config, const c10::Device& device, TaskScope scope) {
  return registration(config.data.kind).make(config, device, scope);
}

}  // namespace causal
