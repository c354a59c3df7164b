// Test helper: a byte-tokenizer token file holding the given documents.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/token_file.h"
#include "data/tokenizer.h"

namespace causal::testing {

// Writes `docs` to `path`, each stored as [BOS, bytes..., EOS].
inline void write_byte_docs(const std::string& path, const std::vector<std::string>& docs,
                            std::optional<TokenDtype> dtype = std::nullopt) {
  ByteTokenizer tok;
  std::vector<int64_t> tokens, starts;
  for (const std::string& d : docs) {
    starts.push_back(static_cast<int64_t>(tokens.size()));
    tokens.push_back(tok.info().bos_id);
    for (int64_t id : tok.encode(d)) tokens.push_back(id);
    tokens.push_back(tok.info().eos_id);
  }
  write_token_file(path, tok.info(), tokens, starts, dtype);
}

}  // namespace causal::testing
