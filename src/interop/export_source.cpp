// Checkpoint -> InteropModel, and what GGUF (llama.cpp) and transformers cannot express.
#include "interop/export_source.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "config/config_io.h"
#include "core/errors.h"
#include "model/lora.h"
#include "review/checkpoint_model.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("[export] cannot read " + path.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string format_label(const std::string& format) {
  return format == "gguf" ? "GGUF (llama.cpp)" : "the HF layout (transformers)";
}

}  // namespace

InteropModel load_export_source(const std::string& run_dir, const std::string& ref, bool merge) {
  CheckpointModel loaded = load_checkpoint_model(run_dir, ref, {});
  InteropModel out;
  out.model = loaded.config.model;
  out.config = config_to_json(loaded.config);
  out.origin = (loaded.checkpoint.dir / "config.json").string();
  torch::NoGradGuard no_grad;
  const auto cpu = [](const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  };
  if (merge) {
    for (const auto& [name, tensor] : folded_parameters(*loaded.model)) out.tensors[name] = cpu(tensor);
    // A merged export is a whole model, as if fully fine-tuned: its config no longer names adapters.
    if (out.config.contains("train")) out.config["train"].erase("lora");
  } else {
    for (const auto& [name, tensor] : dense_parameters(*loaded.model)) out.tensors[name] = cpu(tensor);
    for (const auto& [path, lora] : lora_adapters(*loaded.model))
      out.adapters[path] = {cpu(lora->a), cpu(lora->b),
                            lora->magnitude.defined() ? cpu(lora->magnitude) : torch::Tensor()};
    if (!out.adapters.empty()) {
      out.lora = loaded.config.train.lora;
      if (loaded.checkpoint.state.base) out.base_origin = loaded.checkpoint.state.base->dir.string();
    }
  }
  const fs::path info_file = loaded.checkpoint.dir / kTokenizerInfoFile;
  if (fs::exists(info_file)) {
    InteropTokenizer tokenizer;
    tokenizer.info = tokenizer_info_from_json(nlohmann::json::parse(read_all(info_file)), info_file.string());
    const fs::path model_file = loaded.checkpoint.dir / kTokenizerModelFile;
    if (fs::exists(model_file)) tokenizer.model_bytes = read_all(model_file);
    out.tokenizer = std::move(tokenizer);
  }
  return out;
}

void check_whole_model(const InteropModel& model, const std::string& format) {
  if (model.adapters.empty()) return;
  throw ConfigError(model.origin, "train.lora",
                    "the checkpoint holds LoRA adapters on a frozen base, not a whole model: add --merge to "
                    "fold them into the base for --format " +
                        format + " (docs/finetune.md)");
}

TargetArchitecture check_exportable(const ModelConfig& m, const std::string& format,
                                    const std::string& source) {
  const std::string target = format_label(format);
  auto refuse = [&](const std::string& field, const std::string& value, const std::string& supported) {
    throw ConfigError(source, field, value + ": " + target + " cannot express it; supported: " + supported);
  };
  if (m.inputs.size() != 1)
    refuse("model.inputs", std::to_string(m.inputs.size()) + " input fields", "exactly one (token ids)");
  if (m.output_vocab != m.inputs[0].vocab)
    refuse("model.output_vocab", std::to_string(m.output_vocab),
           "an output vocab equal to model.inputs[0].vocab (" + std::to_string(m.inputs[0].vocab) + ")");
  if (m.qk_norm) refuse("model.qk_norm", "true", "false (no q/k normalisation in llama, qwen2 or gpt2)");
  if (m.attention_window > 0)
    refuse("model.attention_window", std::to_string(m.attention_window),
           "0 (llama, qwen2 and gpt2 attend to every earlier token)");
  if (m.ffn == FfnKind::kRelu)
    refuse("model.ffn", "\"relu\"", "\"swiglu\" (llama, qwen2), \"gelu\" or \"gelu_tanh\" (gpt2)");
  const bool llama = m.norm == NormKind::kRmsNorm;
  if (llama) {
    if (m.position != PositionKind::kRope)
      refuse("model.position", "\"" + to_string(m.position) + "\"",
             "\"rope\" with model.norm \"rmsnorm\" (llama)");
    if (m.ffn != FfnKind::kSwiglu)
      refuse("model.ffn", "\"" + to_string(m.ffn) + "\"", "\"swiglu\" with model.norm \"rmsnorm\" (llama)");
    if (m.bias)
      refuse("model.bias", "true",
             "false with model.norm \"rmsnorm\" (llama has no biases; qwen2 has them on q, k and v only: "
             "model.qkv_bias)");
    if (m.rope.scaling != RopeScaling::kNone && m.rope.scaling != RopeScaling::kLinear)
      refuse("model.rope.scaling", "\"" + to_string(m.rope.scaling) + "\"",
             "\"none\" or \"linear\" (no exact mapping of causal's " + to_string(m.rope.scaling) + ")");
    return m.qkv_bias ? TargetArchitecture::kQwen2 : TargetArchitecture::kLlama;
  }
  if (m.position != PositionKind::kLearned)
    refuse("model.position", "\"" + to_string(m.position) + "\"",
           "\"learned\" with model.norm \"layernorm\" (gpt2), or \"rope\" with \"rmsnorm\" (llama)");
  if (m.ffn != FfnKind::kGelu && m.ffn != FfnKind::kGeluTanh)
    refuse("model.ffn", "\"" + to_string(m.ffn) + "\"",
           "\"gelu\" or \"gelu_tanh\" with model.norm \"layernorm\" (gpt2)");
  if (m.n_kv_heads != m.n_heads)
    refuse("model.n_kv_heads", std::to_string(m.n_kv_heads),
           "model.n_heads (" + std::to_string(m.n_heads) + "): gpt2 has no grouped-query attention");
  if (m.bias && !m.tie_embeddings)
    refuse("model.bias", "true with an untied head",
           "no head.bias: gpt2's output projection has none (tie the embeddings, or model.bias false)");
  return TargetArchitecture::kGpt2;
}

}  // namespace causal
