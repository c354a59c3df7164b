// LoRA adapters on a causal model written as their consumers load them: a GGUF adapter for llama.cpp
// (--lora, llama_adapter_lora_init) and a PEFT folder for transformers (PeftModel.from_pretrained). Names
// come from the base export's tensor map (interop/tensor_map.h), q/k rows of B in the base file's order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "interop/interop_model.h"

namespace causal {

// One adapted linear layer: W' = W + scale * b @ a, W the causal parameter `parameter` (out, in); with
// DoRA W' = (magnitude / n) (W + scale * b @ a), n the row norms of W + scale * b @ a.
struct LoraTensors {
  std::string parameter;  // causal weight name, e.g. "blocks.0.attn.q_proj.weight" or "head.weight"
  at::Tensor a;           // (r, in) float32
  at::Tensor b;           // (out, r) float32
  at::Tensor magnitude;   // (out) float32, DoRA only
};

struct LoraAdapter {
  ModelConfig model;  // the base model's resolved config
  std::vector<LoraTensors> tensors;
  int64_t rank = 0;
  double alpha = 0.0;
  bool rslora = false;  // scale alpha / sqrt(rank) instead of alpha / rank
  bool dora = false;    // every tensor has its magnitude
};

// The adapters of an adapter checkpoint's export source (load_export_source without merge), under their
// weights' names. Throws ConfigError naming model.origin when it holds none: a whole model has no adapter
// to write.
LoraAdapter lora_adapter_of(const InteropModel& model, const std::string& format);

// alpha / rank, or alpha / sqrt(rank) with rslora.
double lora_scale(const LoraAdapter& adapter);

// The GGUF adapter, written whole or not at all: general.type "adapter", adapter.type "lora",
// adapter.lora.alpha chosen so that llama.cpp's alpha / rank (rank read per tensor) equals lora_scale;
// tensors "<base tensor>.lora_a" (r, in) and ".lora_b" (out, r). Throws ConfigError for an adapter the base
// export cannot carry (unknown target, tied head, shapes, DoRA: llama.cpp's adapters have no magnitude),
// IoError when writing fails.
void write_gguf_lora(const LoraAdapter& adapter, const std::filesystem::path& out);

// The PEFT folder `out_dir` (must not exist; built in a temporary sibling, then renamed):
// adapter_config.json and adapter_model.safetensors under PEFT's names (DoRA: use_dora and each module's
// lora_magnitude_vector; not on GPT-2's fused c_attn). Throws as write_gguf_lora, and UsageError for an
// existing `out_dir`.
void write_peft_adapter(const LoraAdapter& adapter, const std::filesystem::path& out_dir,
                        const std::string& base_model_name);

}  // namespace causal
