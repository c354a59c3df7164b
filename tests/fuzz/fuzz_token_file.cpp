// libFuzzer harness: a .tok token file, through the cheap header check and the full validating open, then
// every access the validation promises is safe (each document, each id, the byte counts).
#include <string>

#include "data/token_file.h"
#include "fuzz_support.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("input.tok", data, size);
  try {
    read_token_file_header(path);
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  try {
    TokenFile file(path);
    const int64_t vocab = file.tokenizer().vocab_size;
    int64_t total = 0;
    for (int64_t d = 0; d < file.num_documents(); ++d) {
      const std::vector<int64_t> ids = file.document(d);
      fuzz::require(static_cast<int64_t>(ids.size()) == file.document_length(d), "document length");
      for (int64_t id : ids) fuzz::require(id >= 0 && id < vocab, "ids below the vocab size");
      if (file.header().document_bytes_known) fuzz::require(file.document_bytes(d) >= 0, "byte counts");
      total += static_cast<int64_t>(ids.size());
    }
    fuzz::require(total == file.num_tokens(), "documents cover every token");
    int64_t supervised = 0;
    for (int64_t i = 0; i < file.num_tokens(); ++i) supervised += file.supervised(i) ? 1 : 0;
    fuzz::require(
        supervised - file.num_documents() * (file.header().loss_mask ? 0 : 1) == file.supervised_labels(),
        "the supervised label count is the mask's");
  } catch (const Error& e) {
    fuzz::expected(e);
  }
  return 0;
}
