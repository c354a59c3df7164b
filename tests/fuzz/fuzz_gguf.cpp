// libFuzzer harness: a GGUF file through read_gguf, its tensors dequantized, and what `causal import` then
// reads before converting a tensor: the hyperparameters, the tensor map and each mapped tensor's name and
// shape.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "interop/gguf_model_config.h"
#include "io/gguf_file.h"
#include "io/gguf_quants.h"

using namespace causal;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("model.gguf", data, size);
  GgufFile file;
  try {
    file = read_gguf(path);
  } catch (const Error& e) {
    fuzz::expected(e);
    return 0;
  }
  // What read_gguf promises: each tensor's bytes are exactly its shape's whole blocks, and decode.
  for (const GgufTensor& t : file.tensors) {
    int64_t elements = 1;
    for (int64_t d : t.shape) {
      fuzz::require(d > 0, "tensor dims are positive");
      elements *= d;
    }
    fuzz::require(elements % gguf_block_size(t.type).elements == 0, "a tensor is whole blocks");
    fuzz::require(static_cast<uint64_t>(gguf_tensor_bytes(t.type, t.shape)) == t.data.size(),
                  "a tensor's bytes hold its shape");
    std::vector<float> values(static_cast<size_t>(elements));
    gguf_dequantize(t.type, reinterpret_cast<const uint8_t*>(t.data.data()), elements, values.data());
  }
  // What it read, written and read again, writes the same bytes.
  const std::string copy = (fuzz::scratch_dir() / "copy.gguf").string();
  write_gguf(copy, file);
  const std::string first = read_bytes(copy);
  write_gguf(copy, read_gguf(copy));
  fuzz::require(read_bytes(copy) == first, "a file read and written back reads the same");
  try {
    const ImportedConfig imported = gguf_model_config(file, path);
    for (const MappedTensor& row : tensor_map(InteropFormat::kGguf, imported.arch, imported.model))
      gguf_tensor_for(file, row, path);
    gguf_vocab_pieces(file);
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
