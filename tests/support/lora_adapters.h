// Test helper: small base models with random weights and random LoRA adapters on them, as the adapter
// export and import tests write and read them (interop/adapter_export.h, interop/peft_import.h).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "config/config_io.h"
#include "data/tokenizer.h"
#include "interop/adapter_export.h"
#include "interop/interop_model.h"
#include "model/transformer.h"
#include "support/small_model.h"

namespace causal::testing {

// small_llama_model(259) with halves pairing: the GGUF's q/k rows then move, and B's rows must move with
// them.
inline ModelConfig lora_llama_model(RopePairing pairing = RopePairing::kHalves) {
  ModelConfig m = small_llama_model(259);
  m.rope.original_max_seq_len = 16;
  m.rope.pairing = pairing;
  return m;
}

inline ModelConfig lora_qwen2_model() {
  ModelConfig m = lora_llama_model();
  m.qkv_bias = true;
  return m;
}

// A fresh model's parameters by name, biases made non-zero, so that a wrong bias layout would show.
inline std::map<std::string, at::Tensor> lora_base_weights(const ModelConfig& m, uint64_t seed) {
  torch::manual_seed(seed);
  Transformer model(m);
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model->named_parameters()) out[item.key()] = item.value().detach().clone();
  for (auto& [name, t] : out)
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) t.normal_(0.0, 0.1);
  return out;
}

// The weights as an export source (or an import), with causal's bytes tokenizer.
inline InteropModel lora_interop_model(const ModelConfig& m,
                                       const std::map<std::string, at::Tensor>& tensors) {
  InteropModel im;
  im.model = m;
  RunConfig run;
  run.model = m;
  im.config = config_to_json(run);
  im.tensors = tensors;
  im.tokenizer = InteropTokenizer{ByteTokenizer().info(), ""};
  im.origin = "test";
  return im;
}

// Random A and B (B non-zero, unlike a fresh LoRA) on the weights whose names end in one of `targets`
// (e.g. "attn.q_proj.weight"; "head.weight" the head alone), drawn from the default generator.
inline LoraAdapter random_lora_adapter(const ModelConfig& m, const std::map<std::string, at::Tensor>& weights,
                                       const std::vector<std::string>& targets, int64_t rank, double alpha,
                                       bool rslora) {
  LoraAdapter adapter{m, {}, rank, alpha, rslora};
  for (const auto& [name, w] : weights) {
    bool wanted = false;
    for (const std::string& t : targets)
      wanted = wanted || (t == "head.weight" ? name == t
                                             : name.size() > t.size() &&
                                                   name.compare(name.size() - t.size(), t.size(), t) == 0);
    if (!wanted) continue;
    adapter.tensors.push_back(
        {name, torch::randn({rank, w.size(1)}) * 0.3, torch::randn({w.size(0), rank}) * 0.3});
  }
  return adapter;
}

}  // namespace causal::testing
