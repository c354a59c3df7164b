// Reading other trainers' token files into causal token files.
#include "data/token_import.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/errors.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "io/atomic_file.h"

namespace causal {
namespace {

std::string import_where(const ImportOptions& o) { return "[data import] " + o.input + ": "; }

struct Layout {
  int64_t header_bytes = 0;  // bytes before the first id
  int64_t width = 2;         // bytes per id
  int64_t tokens = 0;        // ids in the file
};

Layout read_layout(std::ifstream& in, uint64_t file_size, const ImportOptions& o) {
  Layout layout;
  if (o.format == ImportFormat::kNanoGpt) {
    if (file_size % 2 != 0) {
      throw DataError(import_where(o) + "size " + std::to_string(file_size) +
                      " bytes is odd: truncated uint16 id at byte offset " + std::to_string(file_size - 1));
    }
    layout.tokens = static_cast<int64_t>(file_size / 2);
  } else {
    if (file_size < static_cast<uint64_t>(kLlmcHeaderBytes)) {
      throw DataError(import_where(o) + "truncated header: " + std::to_string(file_size) +
                      " bytes, llm.c's header needs " + std::to_string(kLlmcHeaderBytes));
    }
    int32_t header[256];
    in.read(reinterpret_cast<char*>(header), sizeof(header));
    if (!in) throw DataError(import_where(o) + "cannot read the header");
    if (header[0] != kLlmcMagic) {
      throw DataError(import_where(o) + "wrong magic " + std::to_string(header[0]) +
                      " at byte offset 0 (llm.c: " + std::to_string(kLlmcMagic) + ")");
    }
    if (header[1] != 1 && header[1] != 2) {
      throw DataError(import_where(o) + "version " + std::to_string(header[1]) +
                      " at byte offset 4 not supported (1 = uint16 ids, 2 = uint32 ids)");
    }
    layout.header_bytes = kLlmcHeaderBytes;
    layout.width = header[1] == 1 ? 2 : 4;
    layout.tokens = header[2];
    const uint64_t expected = static_cast<uint64_t>(kLlmcHeaderBytes + layout.tokens * layout.width);
    if (header[2] < 0 || expected != file_size) {
      throw DataError(import_where(o) + "header (byte offset 8) says " + std::to_string(header[2]) +
                      " tokens, " + std::to_string(expected) + " bytes in all, but the file has " +
                      std::to_string(file_size) + ": truncated or corrupt");
    }
  }
  if (layout.tokens == 0) throw DataError(import_where(o) + "holds no tokens");
  return layout;
}

}  // namespace

std::string import_token_file(const ImportOptions& o) {
  if (o.input.empty() || o.out.empty()) throw DataError("[data import] --input and --out are required");
  if (o.vocab < 1 || o.vocab > (int64_t{1} << 32) - 1) {
    throw DataError("[data import] --vocab must be in 1..4294967295, got " + std::to_string(o.vocab));
  }
  if (o.eot >= o.vocab || o.eot < -1) {
    throw DataError("[data import] --eot " + std::to_string(o.eot) + " is not an id of vocab " +
                    std::to_string(o.vocab));
  }
  std::ifstream in(o.input, std::ios::binary | std::ios::ate);
  if (!in) throw DataError(import_where(o) + "cannot read");
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size == 0) throw DataError(import_where(o) + "empty file (0 bytes)");
  const Layout layout = read_layout(in, file_size, o);

  TokenizerInfo info;
  info.name = kImportedTokenizer;
  const bool split = o.eot >= 0;
  info.vocab_size = split ? o.vocab : o.vocab + 1;
  info.bos_id = info.eos_id = info.pad_id = split ? o.eot : o.vocab;

  int64_t documents = 0, tokens = 0;
  io_as<DataError>([&] {
    write_file_atomically(o.out, [&](std::ostream& out) {
      TokenFileWriter writer(out, o.out, info, "", /*document_bytes_known=*/false);
      constexpr int64_t kBlock = int64_t{1} << 20;  // ids per read
      std::vector<unsigned char> raw(static_cast<size_t>(kBlock * layout.width));
      std::vector<int64_t> ids;
      bool open = false;
      for (int64_t done = 0; done < layout.tokens;) {
        const int64_t n = std::min(kBlock, layout.tokens - done);
        in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(n * layout.width));
        if (in.gcount() != n * layout.width) throw DataError(import_where(o) + "read failed");
        ids.clear();
        for (int64_t i = 0; i < n; ++i) {
          uint32_t id = 0;
          if (layout.width == 2) {
            uint16_t v;
            std::memcpy(&v, raw.data() + 2 * i, 2);
            id = v;
          } else {
            std::memcpy(&id, raw.data() + 4 * i, 4);
          }
          if (id >= o.vocab) {
            throw DataError(import_where(o) + "id " + std::to_string(id) + " at byte offset " +
                            std::to_string(layout.header_bytes + (done + i) * layout.width) + " (token " +
                            std::to_string(done + i) + ") is >= --vocab " + std::to_string(o.vocab));
          }
          if (split && id == static_cast<uint64_t>(o.eot)) {
            writer.append(ids.data(), ids.size());
            ids.clear();
            if (open) writer.end_document(0);
            open = false;
            continue;
          }
          if (!open) {
            writer.begin_document();
            ++documents;
            open = true;
          }
          ids.push_back(id);
        }
        writer.append(ids.data(), ids.size());
        done += n;
      }
      if (open) writer.end_document(0);
      if (documents == 0) {
        throw DataError(import_where(o) + "holds only EOT ids (" + std::to_string(o.eot) + "): no document");
      }
      writer.finish();
      tokens = writer.tokens();
    });
  });
  std::ostringstream s;
  s << "read " << o.input << ": " << layout.tokens << " ids ("
    << (o.format == ImportFormat::kNanoGpt ? "nanoGPT" : "llm.c") << ", " << 8 * layout.width << "-bit)\n";
  s << "wrote " << o.out << ": " << documents << " documents, " << tokens << " tokens; tokenizer "
    << info.describe() << "\n";
  return s.str();
}

}  // namespace causal
