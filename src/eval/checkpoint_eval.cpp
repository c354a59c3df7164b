// Checkpoint evaluation for both tasks.
#include "eval/checkpoint_eval.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "config/config_io.h"
#include "data/retrieval_task.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "eval/checkpoint_model.h"
#include "eval/retrieval_eval.h"
#include "eval/text_eval.h"
#include "train/checkpoint_dir.h"
#include "train/sha256.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

// The default figures go to step_N.json; figures on overridden data get a name of their own so one
// never replaces the other.
std::string eval_file_name(int64_t step, const std::string& split, const std::vector<std::string>& overrides) {
  std::string name = checkpoint_name(step);
  if (!overrides.empty()) {
    std::string joined;
    for (const std::string& o : overrides) joined += o + "\n";
    name += "." + split + "-" + sha256_hex(joined).substr(0, 8);
  }
  return name + ".json";
}

void write_atomically(const fs::path& file, const nlohmann::json& value) {
  fs::create_directories(file.parent_path());
  const fs::path temp = file.string() + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << value.dump(2) << "\n";
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + temp.string());
  }
  fs::rename(temp, file);
}

}  // namespace

EvalOutcome evaluate_checkpoint(const EvalRequest& request) {
  CheckpointModel loaded = load_checkpoint_model(request.run_dir, request.checkpoint, request.overrides);
  const RunConfig& config = loaded.config;
  const bool text = config.data.kind == DataKind::kText;
  const std::string held_out = text ? "val" : "test";
  const std::string split = request.split.empty() ? held_out : request.split;
  if (split != held_out) {
    throw ConfigError("--split", split,
                      text ? "text runs are evaluated on data.val (point it at another file with --set "
                             "data.val=FILE)"
                           : "retrieval runs are evaluated on their test split");
  }

  EvalOutcome outcome;
  nlohmann::json& figures = outcome.figures;
  if (text) {
    const TokenFile val(config.data.val);
    check_model_vocab(val.header(), config.data.val, config.model.inputs[0].vocab, config.model.output_vocab);
    const TextEvalReport report = evaluate_text(loaded.model, val, TextRowOptions::from(config.data),
                                                config.train.batch_size, loaded.device);
    figures = report.to_json("");
    outcome.table = format_text_table(report.to_json("val_"));
  } else {
    const RetrievalData data = build_retrieval_data(config.data);
    const RetrievalReport report = evaluate_retrieval(loaded.model, data, loaded.device);
    figures = report.to_json();
    figures["loss"] = report.test_loss;
    outcome.table = format_retrieval_table(figures);
  }
  const int64_t step = loaded.checkpoint.state.step;
  figures["step"] = step;
  figures["split"] = split;
  figures["checkpoint"] = loaded.checkpoint.dir.string();
  figures["overrides"] = request.overrides;
  figures["data"] = config_to_json(config)["data"];
  outcome.file = (fs::path(request.run_dir) / "eval" /
                  eval_file_name(step, split, request.overrides))
                     .string();
  write_atomically(outcome.file, figures);
  outcome.table = "checkpoint " + loaded.checkpoint.dir.string() + " (step " + std::to_string(step) + "), " +
                  split + " split\n" + outcome.table;
  return outcome;
}

}  // namespace causal
