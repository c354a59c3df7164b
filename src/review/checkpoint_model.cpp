// Checkpoint -> config -> model with weights.
#include "review/checkpoint_model.h"

#include <filesystem>
#include <set>

#include "checkpoint/checkpoint_retry.h"
#include "config/config_io.h"
#include "core/errors.h"
#include "core/runtime.h"
#include "model/lora.h"
#include "model/weight_init.h"

namespace causal {

namespace {

// Model fields that change how the trained weights are applied, never the weights themselves.
const std::set<std::string> kEvaluationModelFields = {
    "model.max_seq_len",    "model.attention",     "model.attention_block",
    "model.autocast",       "model.kernels",       "model.weight_shadows",
    "model.rope.scaling",   "model.rope.factor",   "model.rope.original_max_seq_len",
    "model.rope.beta_fast", "model.rope.beta_slow"};

bool may_change_at_evaluation(const std::string& path) {
  return path.rfind("data.", 0) == 0 || path == "device" || path == "threads" ||
         kEvaluationModelFields.count(path) > 0;
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& run_dir, const std::string& ref,
                                      const std::vector<std::string>& overrides, const std::string& adapter,
                                      const std::string& command) {
  bool sets_original_length = false, sets_max_seq_len = false;
  for (const std::string& assignment : overrides) {
    const std::string path = assignment.substr(0, assignment.find('='));
    if (!may_change_at_evaluation(path)) {
      throw ConfigError(
          "--set", path,
          "cannot change when evaluating a checkpoint: it would change the trained weights or what "
          "they compute; only data.*, device, threads, model.max_seq_len, model.attention, "
          "model.attention_block, model.autocast, model.kernels, model.weight_shadows and "
          "model.rope.{scaling,factor,original_max_seq_len,"
          "beta_fast,beta_slow} may (docs/checkpoints.md)");
    }
    sets_original_length |= path == "model.rope.original_max_seq_len";
    sets_max_seq_len |= path == "model.max_seq_len";
  }
  if (!std::filesystem::is_directory(run_dir)) throw CheckpointError("[checkpoint] no run folder " + run_dir);
  CheckpointModel loaded;
  // Beside a live run, pruning may take the newest checkpoint while it loads: then the newest again, once.
  read_newest_checkpoint(run_dir, ref, [&](const std::filesystem::path& dir) {
    loaded = CheckpointModel{};
    loaded.checkpoint = read_checkpoint(dir);
    const std::string source = (loaded.checkpoint.dir / "config.json").string();
    const RunConfig trained = parse_config_text(loaded.checkpoint.config.dump(), source, {kWithoutEvalTasks});
    // A learned position table has max_seq_len rows: the trained weights fix it.
    if (sets_max_seq_len && trained.model.position == PositionKind::kLearned) {
      throw ConfigError(
          "--set", "model.max_seq_len",
          "cannot change when evaluating a checkpoint with model.position \"learned\": its position "
          "table has " +
              std::to_string(trained.model.max_seq_len) + " trained rows (rope and none have no table)");
    }
    // yarn measures frequencies against the trained length, so a longer max_seq_len must not move it.
    std::vector<std::string> applied = {kWithoutEvalTasks};
    if (!sets_original_length) {
      applied.push_back("model.rope.original_max_seq_len=" +
                        std::to_string(trained.model.rope.original_max_seq_len));
    }
    applied.insert(applied.end(), overrides.begin(), overrides.end());
    loaded.config = parse_config_text(loaded.checkpoint.config.dump(), source, applied);
    const AdapterChoice choice = resolve_adapter(adapter, loaded.checkpoint, run_dir, command);
    loaded.adapter = choice.identity;
    loaded.own_weights = choice.run_own;
    // Another run's adapters bring their own train.lora (rank, targets, scale); none attaches none.
    if (!choice.adapters) {
      loaded.config.train.lora = LoraConfig{};
    } else if (choice.adapters->dir != loaded.checkpoint.dir) {
      loaded.config.train.lora =
          parse_config_text(choice.adapters->config.dump(), (choice.adapters->dir / "config.json").string(),
                            {kWithoutEvalTasks})
              .train.lora;
    }
    configure_threads(loaded.config.threads);
    loaded.device = resolve_device(loaded.config.device);
    const bool adapters = loaded.config.train.lora.enabled();
    {
      // Base + adapters are loaded whole: no product weight drawn, each held as it is read
      // (model/weight_init.h).
      const SkipWeightInit loaded_next(adapters);
      loaded.model = Transformer(loaded.config.model);
    }
    if (adapters) attach_lora(*loaded.model, loaded.config.train.lora);
    // The base as its adapters trained over it (train.lora.base_dtype); exports read it dequantized.
    const TensorRead hold =
        adapters ? hold_each_loaded(*loaded.model, loaded.config.train.lora.base_dtype) : TensorRead{};
    if (choice.adapters) {
      load_model_weights(*choice.adapters, *loaded.model, hold);
    } else if (loaded.checkpoint.state.base) {
      load_model_weights(read_base_checkpoint(loaded.checkpoint).dir, *loaded.model);
    } else {
      load_model_weights(loaded.checkpoint, *loaded.model);
    }
  });
  loaded.model->to(loaded.device);
  loaded.model->eval();
  return loaded;
}

}  // namespace causal
