// Interpretability probes on a checkpoint: attention maps and per-head attention entropy, and head
// ablation (each head's output zeroed in turn, the change in loss and accuracy reported).
//
// Caveat (docs/diagnostics.md#probes-causal-eval): attention weights show where a head reads, not what
// matters. A low-entropy head may be irrelevant and a diffuse one essential; only an ablation or an
// intervention supports a causal claim.
#pragma once

#include <c10/core/Device.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "task/task.h"

namespace causal {

// {"labels": [...], "layers": [{"heads": [{"entropy", "max_entropy", "weights": [[...]]}]}]}: weights are
// row 0 of the first batch (query x key); entropy is the mean over every valid query of the first batch of
// -sum p ln p (nats), max_entropy the same mean of ln(allowed keys) (a uniform head).
nlohmann::json attention_probe(Transformer& model, const ProbeSet& set, const c10::Device& device);

// {"baseline": {"loss","accuracy"}, "heads":
// [{"layer","head","loss","accuracy","delta_loss","delta_accuracy"}]} over every batch of the set; accuracy =
// argmax == label at labelled positions.
nlohmann::json head_ablation(Transformer& model, const ProbeSet& set, const c10::Device& device);

// Text table of the ablation, largest loss increase first.
std::string format_head_ablation(const nlohmann::json& ablation);

}  // namespace causal
