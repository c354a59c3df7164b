// Evaluation of a language model on a whole token file: loss, perplexity and bits per byte.
#pragma once

#include <c10/core/Device.h>

#include <nlohmann/json.hpp>
#include <string>

#include "data/text_batches.h"
#include "data/token_file.h"
#include "model/transformer.h"

namespace causal {

struct TextEvalReport {
  double loss = 0.0;           // mean cross-entropy over every label position of the split (nats/token)
  double perplexity = 0.0;     // exp(loss)
  double bits_per_byte = 0.0;  // summed loss / ln 2 / bytes of text the labels stand for
  int64_t tokens = 0;          // label positions evaluated
  int64_t bytes = 0;           // text bytes the file's documents were encoded from; -1 unknown (imported)

  // {"<prefix>loss", "<prefix>perplexity", ...}; bits_per_byte and bytes only when the bytes are known.
  nlohmann::json to_json(const std::string& prefix) const;
};

// Runs every row of `file` once (file order, no shuffle) in eval mode without gradients.
TextEvalReport evaluate_text(Transformer& model, const TokenFile& file, const TextRowOptions& options,
                             int64_t batch_size, const c10::Device& device);

// Loss of the first evaluation batch of `file`: the fixed batch behind "initial_loss".
double text_fixed_batch_loss(Transformer& model, const TokenFile& file, const TextRowOptions& options,
                             int64_t batch_size, const c10::Device& device);

std::string format_text_table(const nlohmann::json& results);

}  // namespace causal
