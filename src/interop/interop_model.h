// What export reads from a checkpoint and import builds a run from: a model config, its weights under
// causal's names (docs/model.md) and its tokenizer. Format-neutral; the gguf_ and hf_ files map it.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "config/train_config.h"
#include "data/tokenizer.h"
#include "interop/tensor_map.h"

namespace causal {

struct InteropTokenizer {
  TokenizerInfo info;
  std::string model_bytes;  // the tokenizer's model file (SentencePiece, byte-level BPE); empty for bytes
};

struct InteropModel {
  ModelConfig model;                          // resolved (n_kv_heads, ffn_hidden filled in)
  nlohmann::json config;                      // the whole resolved run config, or null when imported
  std::map<std::string, at::Tensor> tensors;  // causal parameter names -> float32 CPU tensors
  // Export: the run's (absent for ids from another trainer). Import: the file's, when causal rebuilds it
  // (a byte-level BPE vocabulary); otherwise absent, and the data's tokenizer is checked against
  // vocab_pieces.
  std::optional<InteropTokenizer> tokenizer;
  std::string origin;  // export: the checkpoint's config.json (named in errors)
  // Export of an adapter checkpoint without --merge: `tensors` hold the base, these the adapters, by the
  // product's path ("blocks.0.attn.q_proj"): a (r, in) and b (out, r), and with DoRA magnitude (out),
  // float32 CPU.
  struct Adapter {
    at::Tensor a, b;
    at::Tensor magnitude;  // undefined without DoRA
  };
  std::map<std::string, Adapter> adapters;
  LoraConfig lora;          // the adapters' rank, alpha and scale rule (train.lora); rank 0 without them
  std::string base_origin;  // export of adapters: the base checkpoint they were trained on
  std::vector<std::string> vocab_pieces;  // import: the file's vocab, id -> piece (empty: none in it)
};

// Adapters that enter on an existing base (a PEFT folder): what train.lora must say to run them, and each
// adapted product's tensors by its path, as InteropModel::adapters.
struct InteropAdapter {
  LoraConfig lora;  // rank, alpha, dropout, rslora and targets; init is the default (the adapters are given)
  std::map<std::string, InteropModel::Adapter> adapters;
  // Copies of base weights the file carries beside the adapters (PEFT saves lm_head's when it adapts it):
  // causal parameter name -> (the file's tensor name, the tensor as stored, in causal's layout). The base
  // must hold exactly these.
  std::map<std::string, std::pair<std::string, at::Tensor>> base_copies;
  std::string base_model_name;  // what the file says it was trained on (adapter_config.json), for the log
};

}  // namespace causal
