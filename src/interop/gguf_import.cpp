// GGUF reading: the hyperparameters (gguf_model_config) and the tensor map, applied to the file's tensors.
#include "interop/gguf_import.h"

#include <ATen/ATen.h>

#include "data/byte_bpe_model.h"
#include "data/byte_bpe_tokenizer.h"
#include "interop/gguf_model_config.h"
#include "interop/mapped_tensors.h"
#include "interop/tensor_bytes.h"
#include "interop/vocab.h"

namespace causal {
namespace {

// A byte-level BPE vocabulary ("gpt2") becomes the run's tokenizer. causal's own byte vocabulary (259
// pieces, no merges) stays the bytes tokenizer, and SentencePiece vocabularies ("llama") are only
// compared with the data's tokenizer (run_import), since their model file is not in the GGUF.
std::optional<InteropTokenizer> gguf_tokenizer(const GgufFile& file, const std::vector<std::string>& pieces,
                                               const std::string& path) {
  const GgufValue* kind = file.find("tokenizer.ggml.model");
  const std::string* name = kind ? std::get_if<std::string>(&kind->value) : nullptr;
  if (!name || *name != "gpt2") return std::nullopt;
  const ByteTokenizer bytes;
  if (pieces == vocab_of(bytes.info(), "").pieces) return InteropTokenizer{bytes.info(), ""};
  const std::string model_bytes = byte_bpe_model_bytes(byte_bpe_from_gguf(file, path));
  const ByteBpeTokenizer tokenizer(model_bytes, path);
  return InteropTokenizer{tokenizer.info(), model_bytes};
}

}  // namespace

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
  out.tokenizer = gguf_tokenizer(file, out.vocab_pieces, path);
  return out;
}

InteropModel import_gguf(const std::string& path) { return model_from_gguf(read_gguf(path), path); }

}  // namespace causal
