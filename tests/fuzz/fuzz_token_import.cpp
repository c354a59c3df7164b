// libFuzzer harness: nanoGPT and llm.c .bin files through `causal data import`; whatever it writes must
// open as a token file (the importer never produces a file the reader rejects).
#include <string>

#include "data/token_file.h"
#include "data/token_import.h"
#include "fuzz_support.h"

using namespace causal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first 4 bytes choose the flags: the format, --vocab (1..65536) and --eot (none or an id).
  if (size < 4) return 0;
  ImportOptions options;
  options.format = (data[0] & 1) != 0 ? ImportFormat::kLlmc : ImportFormat::kNanoGpt;
  options.vocab = 1 + (static_cast<int64_t>(data[1]) | (static_cast<int64_t>(data[2]) << 8));
  options.eot = (data[0] & 2) != 0 ? static_cast<int64_t>(data[3]) % options.vocab : -1;
  options.input = fuzz::write_input("input.bin", data + 4, size - 4);
  options.out = (fuzz::scratch_dir() / "out.tok").string();
  std::filesystem::remove(options.out);
  try {
    import_token_file(options);
  } catch (const Error& e) {
    fuzz::expected(e);
    return 0;
  }
  try {
    TokenFile file(options.out);
    fuzz::require(file.num_tokens() > 0, "an imported file holds tokens");
  } catch (const Error& e) {
    std::fprintf(stderr, "[fuzz] the imported file does not open: %s\n", e.what());
    fuzz::require(false, "an imported file opens as a token file");
  }
  return 0;
}
