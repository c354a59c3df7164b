// HF reading: config.json (hf_model_config) and the tensor map applied to the safetensors weights.
#include "interop/hf_import.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/errors.h"
#include "interop/hf_model_config.h"
#include "interop/mapped_tensors.h"
#include "interop/vocab.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace causal {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_hf_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path.string(), "", "missing: an HF model folder needs it");
  const nlohmann::json parsed = nlohmann::json::parse(in, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) throw ConfigError(path.string(), "", "not a JSON object");
  return parsed;
}

std::map<std::string, at::Tensor> read_weights(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::exists(dir / "model.safetensors")) {
    files.push_back(dir / "model.safetensors");
  } else if (fs::exists(dir / "model.safetensors.index.json")) {
    const fs::path index = dir / "model.safetensors.index.json";
    for (const std::string& shard : hf_shard_files(read_hf_json(index), index.string()))
      files.push_back(dir / shard);
  } else {
    throw ConfigError((dir / "model.safetensors").string(), "",
                      "missing (nor model.safetensors.index.json): causal imports safetensors weights only");
  }
  std::map<std::string, at::Tensor> weights;
  for (const fs::path& file : files) {
    for (auto& [name, t] : io_as<DataError>([&] { return load_safetensors(file.string()); })) {
      if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kHalf && t.scalar_type() != at::kBFloat16)
        throw ConfigError(file.string(), name,
                          std::string("dtype ") + c10::toString(t.scalar_type()) +
                              ": causal imports only float32, float16 and bfloat16 weights");
      weights[name] = t.to(at::kFloat);
    }
  }
  return weights;
}

}  // namespace

InteropModel import_hf(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const fs::path config_path = dir / "config.json";
  const ImportedConfig imported = hf_model_config(read_hf_json(config_path), config_path.string());
  InteropModel out;
  out.model = imported.model;
  out.config = imported.config;
  const std::map<std::string, at::Tensor> hf = read_weights(dir);
  // Each block has its own tensors: a count beyond the folder's is refused before anything is built per
  // block.
  if (out.model.n_layers > static_cast<int64_t>(hf.size()))
    throw ConfigError(config_path.string(),
                      imported.arch == TargetArchitecture::kGpt2 ? "n_layer" : "num_hidden_layers",
                      std::to_string(out.model.n_layers) + ": the weights hold only " +
                          std::to_string(hf.size()) + " tensors");
  out.tensors = causal_tensors(
      tensor_map(InteropFormat::kHf, imported.arch, out.model), out.model,
      file_rope_pairing(InteropFormat::kHf),
      [&](const MappedTensor& row) {
        auto it = hf.find(row.file);
        // GPT2Model (no head) saves without the "transformer." prefix; GPT2LMHeadModel with it.
        if (it == hf.end() && row.file.rfind("transformer.", 0) == 0) it = hf.find(row.file.substr(12));
        if (it == hf.end()) throw ConfigError(dir_name, row.file, "missing tensor");
        if (it->second.sizes().vec() != row.file_shape)
          throw ConfigError(
              dir_name, row.file,
              "shape " + c10::str(it->second.sizes()) + ", expected " + c10::str(row.file_shape));
        return it->second;
      },
      dir_name);
  if (fs::exists(dir / "tokenizer.model")) {
    std::ifstream in(dir / "tokenizer.model", std::ios::binary);
    out.vocab_pieces = parse_sentencepiece(std::string((std::istreambuf_iterator<char>(in)),
                                                       std::istreambuf_iterator<char>()))
                           .pieces;
  }
  return out;
}

}  // namespace causal
