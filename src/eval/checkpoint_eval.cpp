// Checkpoint evaluation for both tasks.
#include "eval/checkpoint_eval.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "config/config_io.h"
#include "data/retrieval_task.h"
#include "data/text_batches.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "eval/checkpoint_model.h"
#include "eval/probes.h"
#include "eval/retrieval_eval.h"
#include "eval/text_eval.h"
#include "train/checkpoint_dir.h"
#include "train/sha256.h"

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

// A byte token as a readable label: printable ASCII as itself, specials by name, the rest as \xNN.
std::string byte_label(int64_t id, const TokenizerInfo& info) {
  if (id == info.bos_id) return "<bos>";
  if (id == info.eos_id) return "<eos>";
  if (id == info.pad_id) return "<pad>";
  if (id >= 32 && id < 127) return std::string(1, static_cast<char>(id));
  char hex[8];
  std::snprintf(hex, sizeof(hex), "\\x%02llx", static_cast<unsigned long long>(id));
  return hex;
}

ProbeSet text_probe_set(const TokenFile& val, const TextRowOptions& rows, int64_t batch_size,
                        int64_t max_batches) {
  ProbeSet set;
  const TextEvalBatches batches(val, rows, batch_size);
  for (int64_t i = 0; i < std::min(max_batches, batches.num_batches()); ++i)
    set.batches.push_back(batches.batch(i));
  const at::Tensor first = set.batches.at(0).tokens[0].select(1, 0);  // (T)
  for (int64_t t = 0; t < first.size(0); ++t)
    set.labels.push_back(byte_label(first[t].item<int64_t>(), val.tokenizer()));
  return set;
}

ProbeSet retrieval_probe_set(const RetrievalData& data) {
  ProbeSet set;
  set.batches.push_back(data.test.all());
  const at::Tensor first = set.batches[0].tokens[0];  // (T,2): key, value
  for (int64_t t = 0; t < first.size(0); ++t) {
    if (!data.test.valid[0][t].item<bool>()) {
      set.labels.push_back("pad");
      continue;
    }
    const int64_t value = first[t][1].item<int64_t>();
    set.labels.push_back("k" + std::to_string(first[t][0].item<int64_t>()) + "=" +
                         (value == data.value_count ? "?" : "v" + std::to_string(value)));
  }
  return set;
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
  ProbeSet probes;
  const bool probing = request.attention || request.ablate_heads;
  if (text) {
    const TokenFile val(config.data.val);
    check_model_vocab(val.header(), config.data.val, config.model.inputs[0].vocab, config.model.output_vocab);
    const TextRowOptions rows = TextRowOptions::from(config.data);
    const TextEvalReport report =
        evaluate_text(loaded.model, val, rows, config.train.batch_size, loaded.device);
    figures = report.to_json("");
    outcome.table = format_text_table(report.to_json("val_"));
    if (probing) probes = text_probe_set(val, rows, config.train.batch_size, request.probe_batches);
  } else {
    const RetrievalData data = build_retrieval_data(config.data);
    const RetrievalReport report = evaluate_retrieval(loaded.model, data, loaded.device);
    figures = report.to_json();
    figures["loss"] = report.test_loss;
    outcome.table = format_retrieval_table(figures);
    if (probing) probes = retrieval_probe_set(data);
  }
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
  write_atomically(outcome.file, figures);
  outcome.table = "checkpoint " + loaded.checkpoint.dir.string() + " (step " + std::to_string(step) + "), " +
                  split + " split\n" + outcome.table;
  return outcome;
}

}  // namespace causal
