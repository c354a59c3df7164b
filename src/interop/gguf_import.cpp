// GGUF reading: the hyperparameters (gguf_model_config) and the tensor map, applied to the file's tensors.
#include "interop/gguf_import.h"

#include <ATen/ATen.h>

#include "interop/gguf_model_config.h"
#include "interop/mapped_tensors.h"
#include "interop/tensor_bytes.h"

namespace causal {

InteropModel model_from_gguf(const GgufFile& file, const std::string& path) {
  const ImportedConfig imported = gguf_model_config(file, path);
  InteropModel out;
  out.model = imported.model;
  out.config = imported.config;
  out.tensors = causal_tensors(
      tensor_map(InteropFormat::kGguf, imported.arch, out.model), out.model,
      file_rope_pairing(InteropFormat::kGguf),
      [&](const MappedTensor& row) {
        const GgufTensor& t = gguf_tensor_for(file, row, path);
        return tensor_from_bytes(t.data, t.shape, t.type);
      },
      path);
  out.vocab_pieces = gguf_vocab_pieces(file);
  return out;
}

InteropModel import_gguf(const std::string& path) { return model_from_gguf(read_gguf(path), path); }

}  // namespace causal
