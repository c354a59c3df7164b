// Vocab sizes from the data: marking "auto" in config JSON and resolving it.
#include "config/vocab_auto.h"

#include <nlohmann/json.hpp>
#include <regex>

#include "config/config_io.h"

namespace causal {
bool is_vocab_path(const std::string& path) {
  static const std::regex pattern(R"(model\.(output_vocab|inputs\[\d+\]\.vocab))");
  return std::regex_match(path, pattern);
}

void mark_vocab_auto(nlohmann::json& config) {
  if (!config.is_object() || !config.contains("model") || !config["model"].is_object()) return;
  nlohmann::json& model = config["model"];
  if (model.contains("output_vocab") && model["output_vocab"] == "auto") model["output_vocab"] = kVocabAuto;
  if (!model.contains("inputs") || !model["inputs"].is_array()) return;
  for (nlohmann::json& field : model["inputs"]) {
    if (field.is_object() && field.contains("vocab") && field["vocab"] == "auto") field["vocab"] = kVocabAuto;
  }
}

void resolve_vocab_auto(RunConfig& config, const DataVocab& data_vocab) {
  ModelConfig& m = config.model;
  bool any = m.output_vocab == kVocabAuto;
  for (const InputField& field : m.inputs) any = any || field.vocab == kVocabAuto;
  if (!any) return;
  const std::string path = m.output_vocab == kVocabAuto ? "model.output_vocab" : "model.inputs";
  if (config.data.kind != DataKind::kText) {
    throw ConfigError("config", path,
                      "\"auto\" takes the vocab from a text run's data.train; this run's data.kind is " +
                          to_string(config.data.kind));
  }
  if (!data_vocab) throw ConfigError("config", path, "\"auto\" is not accepted here: give the vocab size");
  const int64_t vocab = data_vocab(config.data);
  if (m.output_vocab == kVocabAuto) m.output_vocab = vocab;
  for (InputField& field : m.inputs) {
    if (field.vocab == kVocabAuto) field.vocab = vocab;
  }
}

}  // namespace causal
