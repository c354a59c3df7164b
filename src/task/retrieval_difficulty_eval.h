// Scoring of the decoupled-difficulty grid (data/retrieval_difficulty.h): accuracy per cell of context
// length x distractor count x evidence position, for a trained model or any other answer predictor.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/retrieval_difficulty.h"
#include "model/transformer.h"

namespace causal {

// Predicted answer ids (N) for the rows of a batch (B = N); a model or a constructed oracle.
using AnswerPredictor = std::function<at::Tensor(const Batch&)>;

// {"cells": [{"length", "distractors", "evidence", "count", "accuracy"}, ...]} in the grid's order.
nlohmann::json score_difficulty_grid(const std::vector<DifficultyCell>& cells,
                                     const AnswerPredictor& predict);

// The grid of `config`'s data (rows avoid its train, test and validation rows; generator seed
// data.seed + 2000) scored with `model`; adds "trained_pairs" and the spec.
nlohmann::json evaluate_difficulty(Transformer& model, const RunConfig& config, const DifficultySpec& spec,
                                   const c10::Device& device);

// One block per length: a row per distractor count, a column per evidence index.
std::string format_difficulty_table(const nlohmann::json& figures);

}  // namespace causal
