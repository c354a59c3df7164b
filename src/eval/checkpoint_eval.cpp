// Checkpoint evaluation: the task scores the model, the probes look inside it, the figures are recorded.
#include "eval/checkpoint_eval.h"

#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "config/config_io.h"
#include "eval/checkpoint_model.h"
#include "eval/probes.h"
#include "io/atomic_file.h"
#include "io/sha256.h"
#include "task/task.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// The default figures go to step_N.json; figures on overridden data get a name of their own so one
// never replaces the other.
std::string eval_file_name(int64_t step, const std::string& split,
                           const std::vector<std::string>& overrides) {
  std::string name = checkpoint_name(step);
  if (!overrides.empty()) {
    std::string joined;
    for (const std::string& o : overrides) joined += o + "\n";
    name += "." + split + "-" + sha256_hex(joined).substr(0, 8);
  }
  return name + ".json";
}

std::string format_entropy(const nlohmann::json& probe) {
  std::string out = "attention entropy per head (nats; uniform over allowed keys in brackets)\n";
  char line[96];
  for (size_t l = 0; l < probe["layers"].size(); ++l) {
    out += "  layer " + std::to_string(l) + ":";
    for (const auto& head : probe["layers"][l]["heads"]) {
      std::snprintf(line, sizeof(line), " %.3f [%.3f]", head["entropy"].get<double>(),
                    head["max_entropy"].get<double>());
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace

EvalOutcome evaluate_checkpoint(const EvalRequest& request) {
  CheckpointModel loaded = load_checkpoint_model(request.run_dir, request.checkpoint, request.overrides);
  const RunConfig& config = loaded.config;
  const std::string held_out = task_traits(config.data.kind).held_out_split;
  const std::string split = request.split.empty() ? held_out : request.split;
  if (split != held_out) {
    throw ConfigError("--split", split,
                      "a " + to_string(config.data.kind) + " run is evaluated on its " + held_out +
                          " split (other data: --set data.*)");
  }

  const std::unique_ptr<Task> task = make_task(config, loaded.device, TaskScope::kEvaluation);
  const nlohmann::json evaluation = task->evaluate(loaded.model);
  EvalOutcome outcome;
  nlohmann::json& figures = outcome.figures;
  figures = task->checkpoint_figures(evaluation);
  outcome.table = task->results_table(evaluation);
  ProbeSet probes;
  if (request.attention || request.ablate_heads) probes = task->probe_set(request.probe_batches);
  if (request.attention) {
    figures["attention"] = attention_probe(loaded.model, probes, loaded.device);
    outcome.table += format_entropy(figures["attention"]);
  }
  if (request.ablate_heads) {
    figures["head_ablation"] = head_ablation(loaded.model, probes, loaded.device);
    outcome.table += format_head_ablation(figures["head_ablation"]);
  }
  const int64_t step = loaded.checkpoint.state.step;
  figures["step"] = step;
  figures["split"] = split;
  figures["checkpoint"] = loaded.checkpoint.dir.string();
  figures["overrides"] = request.overrides;
  figures["data"] = config_to_json(config)["data"];
  outcome.file =
      (fs::path(request.run_dir) / "eval" / eval_file_name(step, split, request.overrides)).string();
  io_as<CheckpointError>([&] {
    fs::create_directories(fs::path(outcome.file).parent_path());
    write_file_atomically(outcome.file, figures.dump(2) + "\n");
  });
  outcome.table = "checkpoint " + loaded.checkpoint.dir.string() + " (step " + std::to_string(step) + "), " +
                  split + " split\n" + outcome.table;
  return outcome;
}

}  // namespace causal
