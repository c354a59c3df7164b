// Config loading: JSON (with // comments) -> RunConfig, --set overrides, derived defaults, validation,
// and the resolved config back to JSON. Every error is a ConfigError naming the file/flag and JSON path.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/vocab_auto.h"
#include "core/errors.h"

namespace causal {

// How much of the config a command needs: `inspect` needs only the model section.
enum class ConfigScope { kModel, kRun };

// Reads `path`, applies `overrides` ("dotted.path=value", in order), resolves derived defaults and
// validates. Nothing about tensors is touched. "vocab": "auto" is accepted only with `data_vocab`.
RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                      ConfigScope scope = ConfigScope::kRun, const DataVocab& data_vocab = {});

// The same from already-loaded text (`source` names it in errors).
RunConfig parse_config_text(const std::string& text, const std::string& source,
                            const std::vector<std::string>& overrides = {},
                            ConfigScope scope = ConfigScope::kRun, const DataVocab& data_vocab = {});

// A stored config (a run folder's config.json) as this build reads it: typed and resolved but not validated,
// for readers that show a run rather than train it (the report). Throws ConfigError (naming `source` and the
// path) for a key, type or value this build does not know.
RunConfig read_stored_config(const nlohmann::json& stored, const std::string& source);

// Applied when a stored run config is read to use its model rather than to train it (eval, generate,
// export, replay): its benchmarks (train.eval_tasks) are not scored there, so their files need not exist.
inline constexpr const char* kWithoutEvalTasks = "train.eval_tasks=[]";

// Applies one "dotted.path=value" override; the value is typed by the field it targets.
void apply_override(RunConfig& config, const std::string& assignment);

// Fills values whose default depends on others (n_kv_heads 0, ffn_hidden 0, "auto" vocabs).
void resolve(RunConfig& config, const DataVocab& data_vocab = {});

// Throws ConfigError for the first invalid value (divisibility, ranges, lengths, vocabularies).
void validate(const RunConfig& config, const std::string& source, ConfigScope scope = ConfigScope::kRun);

// Resolved config as JSON: every field, defaults included. Parsing it back gives the same config.
nlohmann::json config_to_json(const RunConfig& config);
std::string config_to_string(const RunConfig& config);  // pretty-printed, 2-space indent

}  // namespace causal
