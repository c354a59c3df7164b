// Checkpoint -> config -> model with weights.
#include "eval/checkpoint_model.h"

#include <filesystem>

#include "config/config_io.h"
#include "core/errors.h"
#include "core/runtime.h"

namespace causal {

CheckpointModel load_checkpoint_model(const std::string& run_dir, const std::string& ref,
                                      const std::vector<std::string>& overrides) {
  for (const std::string& assignment : overrides) {
    const std::string path = assignment.substr(0, assignment.find('='));
    if (path.rfind("data.", 0) != 0 && path != "device" && path != "threads") {
      throw ConfigError("--set", path,
                        "only data.*, device and threads can be overridden when evaluating a checkpoint "
                        "(the model is the one that was trained)");
    }
  }
  if (!std::filesystem::is_directory(run_dir)) throw CheckpointError("[checkpoint] no run folder " + run_dir);
  CheckpointModel loaded;
  loaded.checkpoint = read_checkpoint(find_checkpoint(run_dir, ref));
  const std::string source = (loaded.checkpoint.dir / "config.json").string();
  loaded.config = parse_config_text(loaded.checkpoint.config.dump(), source, overrides);
  configure_threads(loaded.config.threads);
  loaded.device = resolve_device(loaded.config.device);
  loaded.model = Transformer(loaded.config.model);
  load_model_weights(loaded.checkpoint.dir, *loaded.model);
  loaded.model->to(loaded.device);
  loaded.model->eval();
  return loaded;
}

}  // namespace causal
