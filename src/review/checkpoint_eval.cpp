// Checkpoint evaluation: the task scores the model, the probes look inside it, the figures are recorded.
#include "review/checkpoint_eval.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "checkpoint/checkpoint_dir.h"
#include "config/config_io.h"
#include "data/benchmark_file.h"
#include "io/atomic_file.h"
#include "io/run_files.h"
#include "io/sha256.h"
#include "review/checkpoint_model.h"
#include "review/probes.h"
#include "review/run_tokenizer.h"
#include "task/benchmark_eval.h"
#include "task/retrieval_difficulty_eval.h"
#include "task/task.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// The default figures go to step_N.json; figures on overridden data get a name of their own so one
// never replaces the other.
std::string eval_file_name(int64_t step, const std::string& split, const std::vector<std::string>& overrides,
                           bool default_split = true) {
  std::string name = checkpoint_name(step);
  if (!overrides.empty() || !default_split) {
    std::string joined;
    for (const std::string& o : overrides) joined += o + "\n";
    name += "." + split + "-" + sha256_hex(joined).substr(0, 8);
  }
  return name + ".json";
}

std::string format_entropy(const nlohmann::json& probe) {
  std::string out = "attention entropy per head (nats; uniform over allowed keys in brackets)\n";
  for (size_t l = 0; l < probe["layers"].size(); ++l) {
    out += "  layer " + std::to_string(l) + ":";
    for (const auto& head : probe["layers"][l]["heads"])
      out +=
          fmt::format(" {:.3f} [{:.3f}]", head["entropy"].get<double>(), head["max_entropy"].get<double>());
    out += "\n";
  }
  return out;
}

std::string join(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// `--lengths` is data.eval_pairs under another name: each length is scored on its own generated split.
std::vector<std::string> with_lengths(const EvalRequest& request) {
  std::vector<std::string> overrides = request.overrides;
  if (!request.lengths.empty() && !request.difficulty)
    overrides.push_back("data.eval_pairs=[" + join(request.lengths) + "]");
  return overrides;
}

// What names a figure's file besides the overrides: the adapters, when the weights are not the
// checkpoint's own, so that such figures never replace its own.
std::vector<std::string> with_adapter(std::vector<std::string> identity, const CheckpointModel& loaded) {
  if (!loaded.own_weights) {
    const AdapterIdentity& a = loaded.adapter;
    identity.push_back("adapter=" + (a.none() ? std::string("none") : a.checkpoint + "@" + a.sha256));
  }
  return identity;
}

// The figures name the weights behind them; null: a whole checkpoint evaluated as it is.
void record_adapter(EvalOutcome& outcome, const CheckpointModel& loaded) {
  outcome.adapter = loaded.adapter;
  outcome.figures["adapter"] = loaded.adapter.label.empty() ? nlohmann::json() : loaded.adapter.to_json();
}

// The table's first line: which checkpoint, and on it which adapters.
std::string checkpoint_heading(const CheckpointModel& loaded, const std::string& rest) {
  const std::string adapters =
      loaded.adapter.label.empty() ? "" : ", adapters " + describe_adapter(loaded.adapter);
  return "checkpoint " + loaded.checkpoint.dir.string() + " (step " +
         std::to_string(loaded.checkpoint.state.step) + ")" + adapters + rest + "\n";
}

std::string format_lengths(const nlohmann::json& by_pairs, const std::vector<int64_t>& lengths,
                           int64_t trained) {
  std::string out = "retrieval accuracy by context length (records; a row is length + 1 positions)\n";
  for (int64_t length : lengths) {
    const nlohmann::json& entry = by_pairs.at(std::to_string(length));
    out += fmt::format("  {:6}  {:.4f}  (n={}){}\n", length, entry["accuracy"].get<double>(),
                       entry["count"].get<int64_t>(), length == trained ? "  trained length" : "");
  }
  return out;
}

void check_difficulty_request(const EvalRequest& request, const RunConfig& config) {
  if (!task_traits(config.data.kind).scores_by_context_length)
    throw ConfigError("--difficulty", "",
                      "applies to retrieval runs only, got data.kind " + to_string(config.data.kind));
  if (config.data.key_count < 2 || config.data.value_count < 2)
    throw ConfigError(
        "--difficulty", "",
        "needs data.key_count and data.value_count >= 2 (distractors and filler hold other keys and values)");
  for (int64_t length : request.lengths) {
    if (length < 1 || length + 1 > config.model.max_seq_len) {
      throw ConfigError("--lengths", "",
                        "length " + std::to_string(length) +
                            ": each length must be >= 1 and length + 1 (query) <= model.max_seq_len " +
                            std::to_string(config.model.max_seq_len) +
                            " (raise it with --set model.max_seq_len=N for rope or none)");
    }
  }
  for (int64_t d : request.distractors) {
    if (d < 0) throw ConfigError("--distractors", "", "expected counts >= 0, got " + std::to_string(d));
  }
  for (double depth : request.depths) {
    if (!(depth >= 0.0 && depth <= 1.0))
      throw ConfigError("--depths", "", "expected depths in [0, 1], got " + std::to_string(depth));
  }
}

EvalOutcome evaluate_difficulty_grid(const EvalRequest& request, CheckpointModel& loaded) {
  const RunConfig& config = loaded.config;
  check_difficulty_request(request, config);
  DifficultySpec spec;
  if (!request.lengths.empty())
    spec.lengths = request.lengths;
  else
    spec.lengths = {config.data.pairs,
                    std::min<int64_t>(2 * config.data.pairs, config.model.max_seq_len - 1)};
  if (!request.distractors.empty()) spec.distractors = request.distractors;
  if (!request.depths.empty()) spec.depths = request.depths;
  if (request.difficulty_rows > 0) spec.rows = request.difficulty_rows;
  EvalOutcome outcome;
  outcome.figures = evaluate_difficulty(loaded.model, config, spec, loaded.device);
  outcome.table = format_difficulty_table(outcome.figures);
  const int64_t step = loaded.checkpoint.state.step;
  outcome.figures["step"] = step;
  outcome.figures["checkpoint"] = loaded.checkpoint.dir.string();
  outcome.figures["overrides"] = request.overrides;
  record_adapter(outcome, loaded);
  std::vector<std::string> identity = request.overrides;
  identity.push_back("lengths=" + join(spec.lengths) + " distractors=" + join(spec.distractors) +
                     " rows=" + std::to_string(spec.rows));
  for (double d : spec.depths) identity.back() += " " + std::to_string(d);
  outcome.file = (fs::path(request.run_dir) / run_files::kEval /
                  eval_file_name(step, "difficulty", with_adapter(identity, loaded), false))
                     .string();
  io_as<CheckpointError>([&] {
    fs::create_directories(fs::path(outcome.file).parent_path());
    write_file_atomically(outcome.file, outcome.figures.dump(2) + "\n");
  });
  outcome.table = checkpoint_heading(loaded, "") + outcome.table;
  return outcome;
}

// Before the checkpoint is loaded (a pretrained model takes a while): flags that cannot go together.
void check_tasks_flags(const EvalRequest& request) {
  if (request.difficulty || !request.lengths.empty() || request.attention || request.ablate_heads ||
      !request.split.empty()) {
    throw UsageError(
        "eval --tasks scores only the benchmarks: leave out --split, --lengths, --difficulty, "
        "--attention and --ablate-heads");
  }
  std::set<std::string> names;
  for (const std::string& path : request.tasks) {
    if (!names.insert(benchmark_name(path)).second)
      throw UsageError("eval --tasks " + path + ": another file is named '" + benchmark_name(path) +
                       "' too: benchmarks are reported by file name");
  }
}

EvalOutcome evaluate_benchmarks(const EvalRequest& request, CheckpointModel& loaded) {
  const RunConfig& config = loaded.config;
  if (!task_traits(config.data.kind).generates_text)
    throw ConfigError("--tasks", "",
                      "benchmarks score text: text runs only, got data.kind " + to_string(config.data.kind));
  const RunTokenizer run = run_tokenizer(loaded.checkpoint);
  if (!run.tokenizer) {
    throw DataError("[benchmark] the run's ids were imported from another trainer (tokenizer " +
                    run.info.name + "): benchmarks need the tokenizer that made them");
  }
  std::vector<Benchmark> benchmarks;
  for (const std::string& path : request.tasks) benchmarks.push_back(read_benchmark(path));
  EvalOutcome outcome;
  std::vector<BenchmarkReport> reports;
  nlohmann::json by_name = nlohmann::json::object();
  double seconds = 0.0;
  for (const Benchmark& benchmark : benchmarks) {
    reports.push_back(score_benchmark(loaded.model, benchmark, *run.tokenizer, loaded.config.train.batch_size,
                                      loaded.device));
    by_name[benchmark.name] = reports.back().to_json(/*per_item=*/true);
    seconds += reports.back().seconds;
  }
  const int64_t step = loaded.checkpoint.state.step;
  outcome.figures = {{"benchmarks", by_name},
                     {"seconds", seconds},
                     {"step", step},
                     {"checkpoint", loaded.checkpoint.dir.string()},
                     {"overrides", request.overrides},
                     {"tokenizer", run.info.describe()}};
  record_adapter(outcome, loaded);
  std::vector<std::string> identity = request.overrides;
  for (const std::string& path : request.tasks) identity.push_back("task=" + path);
  outcome.file = (fs::path(request.run_dir) / run_files::kEval /
                  eval_file_name(step, "tasks", with_adapter(identity, loaded), false))
                     .string();
  io_as<CheckpointError>([&] {
    fs::create_directories(fs::path(outcome.file).parent_path());
    write_file_atomically(outcome.file, outcome.figures.dump(2) + "\n");
  });
  outcome.table = checkpoint_heading(loaded, "") + format_benchmark_table(reports);
  for (const BenchmarkReport& r : reports) {
    if (r.truncated_choices == 0) continue;
    outcome.table += "  " + r.name + ": " + std::to_string(r.truncated_choices) + " of " +
                     std::to_string(r.choices) + " context+choice pairs exceed model.max_seq_len " +
                     std::to_string(loaded.config.model.max_seq_len) + " and were cut from the left\n";
  }
  return outcome;
}

}  // namespace

EvalOutcome evaluate_checkpoint(const EvalRequest& request) {
  if (!request.tasks.empty()) check_tasks_flags(request);
  CheckpointModel loaded =
      load_checkpoint_model(request.run_dir, request.checkpoint, with_lengths(request), request.adapter);
  const RunConfig& config = loaded.config;
  if (!request.tasks.empty()) return evaluate_benchmarks(request, loaded);
  if (request.difficulty) return evaluate_difficulty_grid(request, loaded);
  const TaskTraits& traits = task_traits(config.data.kind);
  if (!request.lengths.empty() && !traits.scores_by_context_length)
    throw ConfigError("--lengths", "",
                      "applies to retrieval runs only, got data.kind " + to_string(config.data.kind));
  const std::string held_out = traits.held_out_split;
  const std::string split = request.split.empty() ? held_out : request.split;
  const bool validation = traits.validation_split != nullptr && split == traits.validation_split;
  if (split != held_out && !validation) {
    throw ConfigError("--split", split,
                      "a " + to_string(config.data.kind) + " run is evaluated on its " + held_out +
                          " split (other data: --set data.*)");
  }

  const std::unique_ptr<Task> task = make_task(config, loaded.device, TaskScope::kEvaluation);
  const auto start = std::chrono::steady_clock::now();
  const nlohmann::json evaluation =
      validation ? task->evaluate_validation(loaded.model) : task->evaluate(loaded.model);
  // The evaluation pass alone: loading and verifying the checkpoint are not part of it.
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EvalOutcome outcome;
  nlohmann::json& figures = outcome.figures;
  figures = task->checkpoint_figures(evaluation);
  figures["seconds"] = seconds;
  if (figures.contains("tokens") && figures["tokens"].is_number() && seconds > 0)
    figures["tokens_per_s"] = figures["tokens"].get<double>() / seconds;
  outcome.table = task->results_table(evaluation);
  if (!request.lengths.empty() && !validation) {
    outcome.table += format_lengths(evaluation.at("by_pairs"), request.lengths, config.data.pairs);
  }
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
  record_adapter(outcome, loaded);
  outcome.file = (fs::path(request.run_dir) / run_files::kEval /
                  eval_file_name(step, split, with_adapter(with_lengths(request), loaded), split == held_out))
                     .string();
  io_as<CheckpointError>([&] {
    fs::create_directories(fs::path(outcome.file).parent_path());
    write_file_atomically(outcome.file, figures.dump(2) + "\n");
  });
  outcome.table = checkpoint_heading(loaded, ", " + split + " split") + outcome.table;
  return outcome;
}

std::vector<EvalOutcome> evaluate_each_adapter(const EvalRequest& request,
                                               const std::vector<std::string>& adapters) {
  EvalRequest one = request;
  if (adapters.size() <= 1) {
    one.adapter = adapters.empty() ? "" : adapters.front();
    return {evaluate_checkpoint(one)};
  }
  if (!request.tasks.empty()) check_tasks_flags(request);
  if (!fs::is_directory(request.run_dir))
    throw CheckpointError("[checkpoint] no run folder " + request.run_dir);
  // One checkpoint for every adapter, named by its directory: a run writing a newer one meanwhile does
  // not split the comparison across two.
  const CheckpointInfo run = read_checkpoint(find_checkpoint(request.run_dir, request.checkpoint));
  one.checkpoint = run.dir.string();
  std::vector<AdapterIdentity> seen;
  for (const std::string& spec : adapters) {
    const AdapterIdentity identity = resolve_adapter(spec, run, request.run_dir, "eval").identity;
    for (const AdapterIdentity& other : seen) {
      if (other.checkpoint == identity.checkpoint)
        throw UsageError("eval: --adapter " + spec + " names the adapters " + describe_adapter(identity) +
                         " a second time");
    }
    seen.push_back(identity);
  }
  std::vector<EvalOutcome> outcomes;
  for (const std::string& spec : adapters) {
    one.adapter = spec;
    outcomes.push_back(evaluate_checkpoint(one));
  }
  return outcomes;
}

}  // namespace causal
