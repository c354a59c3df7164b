// `"vocab": "auto"` and `"output_vocab": "auto"`: vocab sizes taken from the training data's tokenizer.
// The config layer sits below data, so the data layer installs the function that reads a token file.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "config/config.h"

namespace causal {

// Stands for "auto" in a vocab field until resolve() replaces it; never in a resolved config.
constexpr int64_t kVocabAuto = -1;

// model.output_vocab or model.inputs[N].vocab: the fields that accept "auto".
bool is_vocab_path(const std::string& path);

// Replaces "auto" in the vocab fields of a config's JSON by kVocabAuto, so the typed reader accepts it.
void mark_vocab_auto(nlohmann::json& config);

// Vocab size of the tokenizer of data.train (installed by src/data/token_file.cpp).
using VocabAutoResolver = std::function<int64_t(const RunConfig&)>;
void set_vocab_auto_resolver(VocabAutoResolver resolver);

// Replaces every kVocabAuto by the training file's vocab size. Throws ConfigError when the run is not a
// text run, and the resolver's DataError when data.train cannot be read.
void resolve_vocab_auto(RunConfig& config);

}  // namespace causal
