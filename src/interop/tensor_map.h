// Which tensor of a GGUF or HF file holds which causal parameter, and how: one table per architecture
// with a column per format, read by both export and import. Knows shapes and names, not tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/model_config.h"

namespace causal {

// The architecture a model is written as: llama (RMSNorm, RoPE, SwiGLU, no biases), qwen2 (llama with
// biases on q, k and v) or gpt2 (LayerNorm, learned positions, GELU).
enum class TargetArchitecture { kLlama, kQwen2, kGpt2 };

enum class InteropFormat { kGguf, kHf };

// One causal parameter and the file tensor it lives in.
struct MappedTensor {
  std::string causal;               // causal's parameter name (docs/model.md)
  std::string file;                 // the file's tensor name
  std::vector<int64_t> file_shape;  // the whole file tensor's shape, as the file stores it
  bool transposed = false;          // stored (in, out): transformers' GPT-2 Conv1D
  // The parameter is rows [part * n / parts, (part + 1) * n / parts) of the file tensor (transposed back
  // first): GPT-2's q, k and v share one fused tensor. Slices of one tensor are adjacent in the map.
  int64_t part = 0, parts = 1;
  int64_t rotary_heads = 0;  // q/k rows: heads whose RoPE pairs are renumbered when the pairings differ
  // How these rows pair dims in the file when not as file_rope_pairing(format) says: llama.cpp's qwen2 graph
  // rotates halves (its NEOX rope), so its GGUF q/k rows keep transformers' order.
  std::optional<RopePairing> file_pairing;
  bool absent = false;  // a bias the model does not have (model.bias, model.qkv_bias): zeros in the file
};

// How llama's q/k rows pair dims in `format`: llama.cpp rotates adjacent pairs, transformers rotate halves
// (a row's own file_pairing overrides it).
RopePairing file_rope_pairing(InteropFormat format);

// Every tensor of `m` (a validated config) written as `arch` in `format`, in file order.
std::vector<MappedTensor> tensor_map(InteropFormat format, TargetArchitecture arch, const ModelConfig& m);

// "llama", "qwen2" or "gpt2": GGUF's general.architecture.
std::string architecture_name(TargetArchitecture arch);

// The module a weight belongs to: "model.layers.0.self_attn.q_proj.weight" ->
// "model.layers.0.self_attn.q_proj".
std::string module_of_weight(const std::string& weight);

}  // namespace causal
