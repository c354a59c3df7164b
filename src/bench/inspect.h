// `causal inspect`: the cost model's figures (config/cost_model.h) for a config that is resolved and
// checked first, as a table or JSON, and the memory check of `train` and `bench`. The model is never built.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "config/cost_model.h"

namespace causal {

// The figures (batch, parameters, flops, memory, scaling) with what they describe.
struct InspectReport : ModelCost {
  ModelConfig model;  // resolved (n_kv_heads, ffn_hidden filled in)
  std::string dtype = "fp32";
  LoraConfig lora;  // rank > 0: LoRA adapters train on the frozen model (train.lora)
};

// 4 for "fp32", 2 for "bf16" and "fp16"; anything else throws ConfigError (source "--dtype").
int64_t bytes_per_element(const std::string& dtype);

// Resolves and validates a copy of `model` (ConfigError if invalid), then counts its parameters.
ParameterCounts parameter_counts(const ModelConfig& model);

// The full report for context T (0 = model.max_seq_len; must not exceed it), batch B and dtype, fully
// fine-tuned, or with `lora` (rank > 0) adapters trained on the frozen model. Throws ConfigError for an
// invalid model, context, batch or dtype, and for a batch whose figures are too large to count
// (check_cost_size).
InspectReport inspect_model(const ModelConfig& model, int64_t context = 0, int64_t batch = 1,
                            const std::string& dtype = "fp32", const LoraConfig& lora = {});

// Bytes a training step holds by the plan: parameters + gradients + AdamW state + activations.
int64_t training_bytes(const MemoryPlan& memory);

// Throws ConfigError (one line naming model.d_model, model.n_layers, train.batch_size and the estimate in
// GiB) when training_bytes(report.memory) exceeds `memory_bytes`, which `where` describes ("this
// machine"); for full fine-tuning the line also gives LoRA's estimate (rank 16 on the default targets) when
// that would fit. memory_bytes <= 0 (unknown) passes. Called before the model is built, so nothing is
// allocated.
void check_training_memory(const InspectReport& report, int64_t memory_bytes, const std::string& where);

// Human table: exact integers, with MiB/GiB (bytes) and K/M/G (counts) beside them.
std::string format_inspect(const InspectReport& report);

// Every figure of the report as one JSON object (for `inspect --json`).
nlohmann::json inspect_to_json(const InspectReport& report);

}  // namespace causal
