// `"vocab": "auto"` and `"output_vocab": "auto"`: vocab sizes taken from the training data's tokenizer.
// The config layer sits below data, so whoever loads a config that may say "auto" passes the reader
// (data/token_file.h's train_vocab_size).
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

// The vocab size of data.train's tokenizer; empty where no data can be read.
using DataVocab = std::function<int64_t(const DataConfig&)>;

// Replaces every kVocabAuto by data_vocab(config.data). Throws ConfigError when the run is not a text run
// or `data_vocab` is empty, and data_vocab's DataError when data.train cannot be read.
void resolve_vocab_auto(RunConfig& config, const DataVocab& data_vocab);

}  // namespace causal
