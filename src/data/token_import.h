// `causal data import`: token files written by other trainers (nanoGPT's flat uint16 .bin, llm.c's .bin
// with its 256 x int32 header) as causal token files, checked id by id.
#pragma once

#include <cstdint>
#include <string>

namespace causal {

enum class ImportFormat { kNanoGpt, kLlmc };

struct ImportOptions {
  ImportFormat format = ImportFormat::kNanoGpt;
  std::string input;  // .bin file
  int64_t vocab = 0;  // ids must be < vocab (GPT-2: 50257)
  int64_t eot = -1;   // end-of-text id splitting documents (GPT-2: 50256); -1 = the file is one document
  std::string out;    // token file to write
};

// llm.c's header: 256 int32, [0] magic, [1] version (1 = uint16 ids, 2 = uint32 ids), [2] token count.
constexpr int32_t kLlmcMagic = 20240520;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

// With an EOT id, every maximal run of ids between EOTs is a document stored [EOT, run..., EOT] (BOS = EOS
// = PAD = EOT, vocab V); without one, the whole file is one document and id V is added as BOS/EOS/PAD
// (vocab V + 1). The tokenizer is recorded as "imported" with no byte counts (no bits per byte). Reads in
// blocks (bounded memory). Throws DataError naming the byte offset for a wrong magic or version, a size
// that does not match the header or the id width, and any id >= vocab. Returns a summary.
std::string import_token_file(const ImportOptions& options);

}  // namespace causal
