// Token file reading (mmap + validation) and atomic writing.
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/hex.h"
#include "io/atomic_file.h"
#include "io/sha256.h"

namespace causal {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token files are little-endian and read in place: a big-endian host needs byte swapping here");

constexpr char kMagic[8] = {'C', 'A', 'U', 'S', 'L', 'T', 'O', 'K'};
// Byte offsets of the header fields (docs/data.md has the table).
constexpr size_t kOffMagic = 0, kOffVersion = 8, kOffWidth = 12, kOffVocab = 16, kOffTokens = 24,
                 kOffDocuments = 32, kOffBos = 40, kOffEos = 48, kOffPad = 56, kOffName = 64,
                 kOffReserved = 96;
// Version 2 uses the first 12 reserved bytes: the embedded model's size and flags.
constexpr size_t kOffModelBytes = 96, kOffFlags = 104, kOffReservedV2 = 108;
constexpr uint32_t kFlagDocumentBytes = 1;  // the document byte count section holds real counts
constexpr uint32_t kFlagLossMask = 2;       // v3: a loss mask section follows the byte counts
constexpr size_t kSha256Bytes = 32;

std::string token_file_at(const std::string& path) { return "[token file] " + path + ": "; }

std::string last_errno_text() { return std::strerror(errno); }

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

uint64_t offsets_begin(const TokenFileHeader& h) {
  return align8(kTokenFileHeaderBytes + static_cast<uint64_t>(h.token_count) * dtype_bytes(h.dtype));
}

// v2: offsets, then the document byte counts, (v3) the loss mask padded to 8 bytes, then the model and its
// sha256.
uint64_t doc_bytes_begin(const TokenFileHeader& h) {
  return offsets_begin(h) + 8 * static_cast<uint64_t>(h.document_count);
}
uint64_t mask_begin(const TokenFileHeader& h) {
  return doc_bytes_begin(h) + 8 * static_cast<uint64_t>(h.document_count);
}
uint64_t model_begin(const TokenFileHeader& h) {
  return mask_begin(h) + (h.loss_mask ? align8(static_cast<uint64_t>(h.token_count)) : 0);
}

std::string dtype_list() { return "2 (u16) or 4 (u32)"; }

// Header checks shared by the reader and the writer: what a header must satisfy on its own.
void check_tokenizer_fields(const TokenizerInfo& t, TokenDtype dtype, const std::string& path) {
  if (t.name.empty() || t.name.size() > kMaxTokenizerName) {
    throw DataError(token_file_at(path) + "corrupt header: tokenizer name must be 1.." +
                    std::to_string(kMaxTokenizerName) + " bytes, got " + std::to_string(t.name.size()));
  }
  for (char c : t.name) {
    if (c < 0x21 || c > 0x7e)
      throw DataError(token_file_at(path) + "corrupt header: tokenizer name is not printable ASCII");
  }
  const int64_t max_vocab = dtype == TokenDtype::kU16 ? (int64_t{1} << 16) : (int64_t{1} << 32);
  if (t.vocab_size < 1 || t.vocab_size > max_vocab) {
    throw DataError(token_file_at(path) + "corrupt header: vocab size " + std::to_string(t.vocab_size) +
                    " out of range 1.." + std::to_string(max_vocab) + " for " + to_string(dtype) + " ids");
  }
  const std::initializer_list<std::pair<const char*, int64_t>> specials = {
      {"bos", t.bos_id}, {"eos", t.eos_id}, {"pad", t.pad_id}};
  for (const auto& [name, id] : specials) {
    if (id < 0 || id >= t.vocab_size) {
      throw DataError(token_file_at(path) + "corrupt header: " + name + " id " + std::to_string(id) +
                      " >= vocab size " + std::to_string(t.vocab_size));
    }
  }
}

// Parses the first kTokenFileHeaderBytes of a file of `file_size` bytes and checks that the counts it
// declares account for exactly that many bytes.
TokenFileHeader parse_header(const unsigned char* p, uint64_t file_size, const std::string& path) {
  if (file_size == 0) {
    throw DataError(token_file_at(path) +
                    "empty file (0 bytes); expected a token file written by `causal data encode`");
  }
  if (file_size < kTokenFileHeaderBytes) {
    throw DataError(token_file_at(path) + "truncated header: file has " + std::to_string(file_size) +
                    " bytes, the header needs " + std::to_string(kTokenFileHeaderBytes));
  }
  if (std::memcmp(p + kOffMagic, kMagic, sizeof(kMagic)) != 0) {
    throw DataError(token_file_at(path) +
                    "not a causal token file (wrong magic bytes; expected \"CAUSLTOK\"); write one with " +
                    "`causal data encode`");
  }
  TokenFileHeader h;
  h.version = load<uint32_t>(p + kOffVersion);
  if (h.version < kTokenFileOldestVersion || h.version > kTokenFileVersion) {
    throw DataError(token_file_at(path) + "format version " + std::to_string(h.version) +
                    " not supported (this build reads versions " + std::to_string(kTokenFileOldestVersion) +
                    ".." + std::to_string(kTokenFileVersion) + "); re-encode the text");
  }
  const uint32_t width = load<uint32_t>(p + kOffWidth);
  if (width != 2 && width != 4) {
    throw DataError(token_file_at(path) + "corrupt header: token width " + std::to_string(width) +
                    " bytes (expected " + dtype_list() + ")");
  }
  h.dtype = width == 2 ? TokenDtype::kU16 : TokenDtype::kU32;
  // Counts are bounded by the file size before any arithmetic, so nothing below can overflow.
  const uint64_t vocab = load<uint64_t>(p + kOffVocab), tokens = load<uint64_t>(p + kOffTokens),
                 documents = load<uint64_t>(p + kOffDocuments);
  const uint64_t bos = load<uint64_t>(p + kOffBos), eos = load<uint64_t>(p + kOffEos),
                 pad = load<uint64_t>(p + kOffPad);
  if (tokens > file_size / width || documents > file_size / 8) {
    throw DataError(token_file_at(path) + "file length " + std::to_string(file_size) +
                    " bytes is too short for the " + std::to_string(tokens) + " tokens and " +
                    std::to_string(documents) + " documents its header declares: truncated or corrupt");
  }
  const uint64_t special_limit = uint64_t{1} << 33;  // far above any valid id; keeps the int64 casts exact
  if (vocab > special_limit || bos > special_limit || eos > special_limit || pad > special_limit) {
    throw DataError(token_file_at(path) + "corrupt header: vocab size or special id out of range");
  }
  h.token_count = static_cast<int64_t>(tokens);
  h.document_count = static_cast<int64_t>(documents);
  const char* name = reinterpret_cast<const char*>(p + kOffName);
  h.tokenizer.name.assign(name, strnlen(name, kMaxTokenizerName));
  for (size_t i = h.tokenizer.name.size(); i < kMaxTokenizerName; ++i) {
    if (name[i] != 0)
      throw DataError(token_file_at(path) + "corrupt header: tokenizer name is not NUL-padded");
  }
  size_t reserved_from = kOffReserved;
  if (h.version >= 2) {
    const uint64_t model = load<uint64_t>(p + kOffModelBytes);
    const uint32_t flags = load<uint32_t>(p + kOffFlags);
    if (model > file_size) {
      throw DataError(token_file_at(path) + "file length " + std::to_string(file_size) +
                      " bytes is too short for the " + std::to_string(model) +
                      "-byte tokenizer model its header declares: truncated or corrupt");
    }
    const uint32_t known = h.version >= 3 ? (kFlagDocumentBytes | kFlagLossMask) : kFlagDocumentBytes;
    if ((flags & ~known) != 0)
      throw DataError(token_file_at(path) + "corrupt header: unknown flags " + std::to_string(flags));
    h.model_bytes = static_cast<int64_t>(model);
    h.document_bytes_known = (flags & kFlagDocumentBytes) != 0;
    h.loss_mask = (flags & kFlagLossMask) != 0;
    reserved_from = kOffReservedV2;
  }
  for (size_t i = reserved_from; i < kTokenFileHeaderBytes; ++i) {
    if (p[i] != 0)
      throw DataError(token_file_at(path) + "corrupt header: reserved byte " + std::to_string(i) +
                      " is not zero");
  }
  h.tokenizer.vocab_size = static_cast<int64_t>(vocab);
  h.tokenizer.bos_id = static_cast<int64_t>(bos);
  h.tokenizer.eos_id = static_cast<int64_t>(eos);
  h.tokenizer.pad_id = static_cast<int64_t>(pad);
  check_tokenizer_fields(h.tokenizer, h.dtype, path);
  // Version 1 was written by the bytes tokenizer alone: a document's text is its ids between BOS and EOS.
  if (h.version == 1) h.document_bytes_known = h.tokenizer.name == "bytes";
  if (h.document_count == 0 || h.token_count == 0) {
    throw DataError(token_file_at(path) + "holds no documents (" + std::to_string(h.token_count) +
                    " tokens, " + std::to_string(h.document_count) + " documents)");
  }
  if (static_cast<uint64_t>(h.file_bytes()) != file_size) {
    throw DataError(token_file_at(path) + "file length " + std::to_string(file_size) +
                    " bytes does not match its header (" + std::to_string(h.token_count) + " " +
                    to_string(h.dtype) + " tokens and " + std::to_string(h.document_count) +
                    " documents need " + std::to_string(h.file_bytes()) + " bytes): truncated or corrupt");
  }
  return h;
}

// The body invariants, shared by the reader (over the mapping) and the writer (over its vectors), so the
// writer can never produce a file the reader rejects. `width` > 0 adds byte offsets to messages (reader).
template <class TokenAt, class StartAt>
void check_body(const std::string& path, const TokenizerInfo& tok, int64_t n, int64_t d, TokenAt token_at,
                StartAt start_at, int64_t width) {
  auto at_offset = [&](int64_t i) {
    std::string s = "token offset " + std::to_string(i);
    if (width > 0) s += " (byte offset " + std::to_string(kTokenFileHeaderBytes + i * width) + ")";
    return s;
  };
  if (start_at(0) != 0) {
    throw DataError(token_file_at(path) + "document offsets must start at 0, first is " +
                    std::to_string(start_at(0)));
  }
  for (int64_t k = 0; k < d; ++k) {
    const int64_t begin = start_at(k);
    const int64_t end = k + 1 < d ? start_at(k + 1) : n;
    if (k + 1 < d && end <= begin) {
      throw DataError(token_file_at(path) + "document offsets not increasing: document " +
                      std::to_string(k + 1) + " starts at token " + std::to_string(end) + ", document " +
                      std::to_string(k) + " at " + std::to_string(begin));
    }
    if (end > n) {
      throw DataError(token_file_at(path) + "document " + std::to_string(k + 1) + " starts at token " +
                      std::to_string(end) + ", past the " + std::to_string(n) + " tokens in the file");
    }
    if (end - begin < 2) {
      throw DataError(token_file_at(path) + "document " + std::to_string(k) + " at " + at_offset(begin) +
                      " has " + std::to_string(end - begin) +
                      " token(s); every document holds at least BOS and EOS");
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = token_at(i);
    if (id < 0 || id >= tok.vocab_size) {
      throw DataError(token_file_at(path) + "token id " + std::to_string(id) + " at " + at_offset(i) +
                      " is out of range for " + "vocab size " + std::to_string(tok.vocab_size) +
                      " (tokenizer " + tok.name + ")");
    }
  }
  for (int64_t k = 0; k < d; ++k) {
    const int64_t begin = start_at(k);
    const int64_t last = (k + 1 < d ? start_at(k + 1) : n) - 1;
    if (token_at(begin) != tok.bos_id) {
      throw DataError(token_file_at(path) + "document " + std::to_string(k) + " at " + at_offset(begin) +
                      " starts with id " + std::to_string(token_at(begin)) + ", not BOS " +
                      std::to_string(tok.bos_id));
    }
    if (token_at(last) != tok.eos_id) {
      throw DataError(token_file_at(path) + "document " + std::to_string(k) + " ends at " + at_offset(last) +
                      " with id " + std::to_string(token_at(last)) + ", not EOS " +
                      std::to_string(tok.eos_id));
    }
  }
}

// Opens `path` read-only and checks it is a regular file; the caller closes the descriptor.
std::pair<int, struct stat> open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(token_file_at(path) + "cannot open: " + last_errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string err = last_errno_text();
    ::close(fd);
    throw DataError(token_file_at(path) + "cannot stat: " + err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(token_file_at(path) + "not a regular file");
  }
  return {fd, st};
}

// Every mask byte is a flag, a document's BOS (never a label) is 0 and the padding after the mask is zero;
// returns the labels the mask lets count. `offsets` are the validated document offsets.
int64_t check_loss_mask(const std::string& path, const TokenFileHeader& h, const unsigned char* mask,
                        const unsigned char* offsets) {
  int64_t count = 0;
  for (int64_t i = 0; i < h.token_count; ++i) {
    if (mask[i] > 1) {
      throw DataError(token_file_at(path) + "loss mask byte " + std::to_string(static_cast<int>(mask[i])) +
                      " at token offset " + std::to_string(i) + " is not 0 or 1: corrupt");
    }
    count += mask[i];
  }
  for (int64_t d = 0; d < h.document_count; ++d) {
    const auto begin = static_cast<int64_t>(load<uint64_t>(offsets + 8 * d));
    if (mask[begin] != 0) {
      throw DataError(token_file_at(path) + "loss mask marks the BOS of document " + std::to_string(d) +
                      " (token offset " + std::to_string(begin) + ") as a label: corrupt");
    }
  }
  for (uint64_t i = static_cast<uint64_t>(h.token_count); i < align8(h.token_count); ++i) {
    if (mask[i] != 0) throw DataError(token_file_at(path) + "loss mask padding is not zero: corrupt");
  }
  return count;
}

}  // namespace

int64_t dtype_bytes(TokenDtype dtype) { return dtype == TokenDtype::kU16 ? 2 : 4; }

std::string to_string(TokenDtype dtype) { return dtype == TokenDtype::kU16 ? "u16" : "u32"; }

TokenDtype smallest_dtype(int64_t vocab_size) {
  return vocab_size <= (int64_t{1} << 16) ? TokenDtype::kU16 : TokenDtype::kU32;
}

int64_t TokenFileHeader::file_bytes() const {
  if (version == 1) return static_cast<int64_t>(doc_bytes_begin(*this));
  const auto model = static_cast<uint64_t>(model_bytes);
  return static_cast<int64_t>(model_begin(*this) + model + (model > 0 ? kSha256Bytes : 0));
}

TokenFileHeader read_token_file_header(const std::string& path) {
  const auto [fd, st] = open_regular_file(path);
  unsigned char bytes[kTokenFileHeaderBytes] = {};
  size_t got = 0;
  while (got < kTokenFileHeaderBytes && got < static_cast<size_t>(st.st_size)) {
    const ssize_t r = ::read(fd, bytes + got, kTokenFileHeaderBytes - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  // A short read of a file stat said was long enough is reported as the truncation it amounts to.
  TokenFileHeader h;
  try {
    h = parse_header(bytes, got < kTokenFileHeaderBytes ? got : static_cast<uint64_t>(st.st_size), path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (h.model_bytes > 0) {
    unsigned char sha[kSha256Bytes] = {};
    const ssize_t r = ::pread(fd, sha, sizeof(sha), st.st_size - static_cast<off_t>(kSha256Bytes));
    if (r != static_cast<ssize_t>(sizeof(sha))) {
      ::close(fd);
      throw DataError(token_file_at(path) + "cannot read the tokenizer model's sha256");
    }
    h.tokenizer.model_sha256 = to_hex(sha, sizeof(sha));
  }
  ::close(fd);
  return h;
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  const auto [fd, st] = open_regular_file(path);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    parse_header(nullptr, 0, path);  // throws the empty-file error
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string map_err = map == MAP_FAILED ? last_errno_text() : "";
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) throw DataError(token_file_at(path) + "mmap failed: " + map_err);
  map_ = map;
  map_bytes_ = size;
  try {
    const auto* base = static_cast<const unsigned char*>(map_);
    header_ = parse_header(base, size, path);
    tokens_ = base + kTokenFileHeaderBytes;
    offsets_ = base + offsets_begin(header_);
    if (header_.version >= 2) doc_bytes_ = base + doc_bytes_begin(header_);
    if (header_.loss_mask) mask_ = base + mask_begin(header_);
    if (header_.model_bytes > 0) {
      const unsigned char* model = base + model_begin(header_);
      model_.assign(reinterpret_cast<const char*>(model), static_cast<size_t>(header_.model_bytes));
      header_.tokenizer.model_sha256 = to_hex(model + header_.model_bytes, kSha256Bytes);
      if (sha256_hex(model_) != header_.tokenizer.model_sha256) {
        throw DataError(token_file_at(path) +
                        "the embedded tokenizer model does not match its sha256 (corrupt)");
      }
    }
    check_body(
        path_, header_.tokenizer, header_.token_count, header_.document_count,
        [this](int64_t i) { return token(i); },
        [this](int64_t d) {
          const uint64_t v = offset_at(d);
          // Offsets beyond int64 are corrupt; clamping keeps them "past the end" in the message.
          return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                     ? std::numeric_limits<int64_t>::max()
                     : static_cast<int64_t>(v);
        },
        dtype_bytes(header_.dtype));
    // Byte counts are what bits per byte divides by: each must be a count, and their sum one too (a u64
    // above int64's range would read back as a negative count; tests/fuzz/fuzz_token_file.cpp feeds such).
    if (header_.document_bytes_known && header_.version >= 2) {
      uint64_t total = 0;
      constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      for (int64_t d = 0; d < header_.document_count; ++d) {
        const uint64_t bytes = load<uint64_t>(doc_bytes_ + 8 * d);
        if (bytes > kMax - total) {
          throw DataError(token_file_at(path) + "document " + std::to_string(d) + " has byte count " +
                          std::to_string(bytes) + ", which with those before it exceeds 2^63 - 1: corrupt");
        }
        total += bytes;
      }
    }
    supervised_labels_ = header_.token_count - header_.document_count;
    if (mask_ != nullptr) supervised_labels_ = check_loss_mask(path_, header_, mask_, offsets_);
  } catch (...) {
    unmap();
    throw;
  }
}

TokenFile::~TokenFile() { unmap(); }

TokenFile::TokenFile(TokenFile&& other) noexcept
    : path_(std::move(other.path_)),
      header_(std::move(other.header_)),
      map_(other.map_),
      map_bytes_(other.map_bytes_),
      tokens_(other.tokens_),
      offsets_(other.offsets_),
      doc_bytes_(other.doc_bytes_),
      mask_(other.mask_),
      supervised_labels_(other.supervised_labels_),
      model_(std::move(other.model_)) {
  other.map_ = nullptr;
  other.map_bytes_ = 0;
  other.tokens_ = other.offsets_ = other.doc_bytes_ = other.mask_ = nullptr;
}

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    header_ = std::move(other.header_);
    map_ = other.map_;
    map_bytes_ = other.map_bytes_;
    tokens_ = other.tokens_;
    offsets_ = other.offsets_;
    doc_bytes_ = other.doc_bytes_;
    mask_ = other.mask_;
    supervised_labels_ = other.supervised_labels_;
    model_ = std::move(other.model_);
    other.map_ = nullptr;
    other.map_bytes_ = 0;
    other.tokens_ = other.offsets_ = other.doc_bytes_ = other.mask_ = nullptr;
  }
  return *this;
}

void TokenFile::unmap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

uint64_t TokenFile::offset_at(int64_t d) const { return load<uint64_t>(offsets_ + 8 * d); }

int64_t TokenFile::document_start(int64_t d) const { return static_cast<int64_t>(offset_at(d)); }

int64_t TokenFile::document_length(int64_t d) const {
  const int64_t end = d + 1 < header_.document_count ? document_start(d + 1) : header_.token_count;
  return end - document_start(d);
}

int64_t TokenFile::token(int64_t i) const {
  return header_.dtype == TokenDtype::kU16 ? load<uint16_t>(tokens_ + 2 * i)
                                           : load<uint32_t>(tokens_ + 4 * i);
}

void TokenFile::read_tokens(int64_t begin, int64_t count, int64_t* out) const {
  if (header_.dtype == TokenDtype::kU16) {
    for (int64_t i = 0; i < count; ++i) out[i] = load<uint16_t>(tokens_ + 2 * (begin + i));
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = load<uint32_t>(tokens_ + 4 * (begin + i));
  }
}

std::vector<int64_t> TokenFile::document(int64_t d) const {
  std::vector<int64_t> ids(document_length(d));
  read_tokens(document_start(d), static_cast<int64_t>(ids.size()), ids.data());
  return ids;
}

int64_t TokenFile::document_bytes(int64_t d) const {
  if (!header_.document_bytes_known)
    throw DataError(token_file_at(path_) + "records no text byte counts (ids imported from another trainer)");
  if (header_.version == 1) return document_length(d) - 2;
  return static_cast<int64_t>(load<uint64_t>(doc_bytes_ + 8 * d));
}

TokenFileWriter::TokenFileWriter(std::ostream& out, std::string path, TokenizerInfo tokenizer,
                                 std::string model, bool document_bytes_known,
                                 std::optional<TokenDtype> dtype, bool loss_mask)
    : out_(out), path_(std::move(path)), model_(std::move(model)), loss_mask_(loss_mask) {
  header_.dtype = dtype.value_or(smallest_dtype(tokenizer.vocab_size));
  header_.tokenizer = std::move(tokenizer);
  header_.model_bytes = static_cast<int64_t>(model_.size());
  header_.document_bytes_known = document_bytes_known;
  check_tokenizer_fields(header_.tokenizer, header_.dtype, path_);
  const std::string model_sha = model_.empty() ? "" : sha256_hex(model_);
  if (model_sha != header_.tokenizer.model_sha256) {
    throw DataError(token_file_at(path_) + "tokenizer model sha256 '" + model_sha +
                    "' differs from the recorded '" + header_.tokenizer.model_sha256 + "'");
  }
  const unsigned char placeholder[kTokenFileHeaderBytes] = {};
  out_.write(reinterpret_cast<const char*>(placeholder), sizeof(placeholder));
}

void TokenFileWriter::put_id(int64_t id) {
  if (id < 0 || id >= header_.tokenizer.vocab_size) {
    throw DataError(token_file_at(path_) + "token id " + std::to_string(id) + " at token offset " +
                    std::to_string(tokens_) + " is out of range for vocab size " +
                    std::to_string(header_.tokenizer.vocab_size) + " (tokenizer " + header_.tokenizer.name +
                    ")");
  }
  if (header_.dtype == TokenDtype::kU16) {
    const auto v = static_cast<uint16_t>(id);
    buffer_.insert(buffer_.end(), reinterpret_cast<const unsigned char*>(&v),
                   reinterpret_cast<const unsigned char*>(&v) + sizeof(v));
  } else {
    const auto v = static_cast<uint32_t>(id);
    buffer_.insert(buffer_.end(), reinterpret_cast<const unsigned char*>(&v),
                   reinterpret_cast<const unsigned char*>(&v) + sizeof(v));
  }
  ++tokens_;
}

void TokenFileWriter::flush_ids() {
  out_.write(reinterpret_cast<const char*>(buffer_.data()), static_cast<std::streamsize>(buffer_.size()));
  buffer_.clear();
}

void TokenFileWriter::begin_document() {
  starts_.push_back(tokens_);
  put_id(header_.tokenizer.bos_id);
  if (loss_mask_) mask_.push_back(0);
}

void TokenFileWriter::append(const int64_t* ids, size_t count, const uint8_t* supervised) {
  for (size_t i = 0; i < count; ++i) put_id(ids[i]);
  if (loss_mask_) {
    for (size_t i = 0; i < count; ++i) mask_.push_back(supervised == nullptr || supervised[i] != 0 ? 1 : 0);
  }
  if (buffer_.size() >= (size_t{1} << 20)) flush_ids();
}

void TokenFileWriter::end_document(int64_t bytes, bool eos_supervised) {
  put_id(header_.tokenizer.eos_id);
  if (loss_mask_) mask_.push_back(eos_supervised ? 1 : 0);
  bytes_.push_back(header_.document_bytes_known ? static_cast<uint64_t>(bytes) : 0);
}

void TokenFileWriter::add_document(const int64_t* body, size_t count, int64_t bytes) {
  begin_document();
  append(body, count);
  end_document(bytes);
}

void TokenFileWriter::finish() {
  if (starts_.empty())
    throw DataError(token_file_at(path_) + "refusing to write a token file with no documents");
  flush_ids();
  header_.token_count = static_cast<int64_t>(tokens_);
  header_.document_count = static_cast<int64_t>(starts_.size());
  auto put = [this](const void* data, size_t n) {
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  };
  const uint64_t written = kTokenFileHeaderBytes + tokens_ * dtype_bytes(header_.dtype);
  const unsigned char zeros[8] = {};
  put(zeros, align8(written) - written);
  put(starts_.data(), 8 * starts_.size());
  put(bytes_.data(), 8 * bytes_.size());
  if (loss_mask_) {
    put(mask_.data(), mask_.size());
    put(zeros, align8(mask_.size()) - mask_.size());
  }
  if (!model_.empty()) {
    put(model_.data(), model_.size());
    // Checked against the model by the constructor, so it is the 64 digits of a digest.
    const std::vector<uint8_t> raw = from_hex(header_.tokenizer.model_sha256).value();
    put(raw.data(), raw.size());
  }

  unsigned char header[kTokenFileHeaderBytes] = {};
  const TokenizerInfo& t = header_.tokenizer;
  std::memcpy(header + kOffMagic, kMagic, sizeof(kMagic));
  store<uint32_t>(header + kOffVersion, kTokenFileVersion);
  store<uint32_t>(header + kOffWidth, static_cast<uint32_t>(dtype_bytes(header_.dtype)));
  store<uint64_t>(header + kOffVocab, t.vocab_size);
  store<uint64_t>(header + kOffTokens, header_.token_count);
  store<uint64_t>(header + kOffDocuments, header_.document_count);
  store<uint64_t>(header + kOffBos, t.bos_id);
  store<uint64_t>(header + kOffEos, t.eos_id);
  store<uint64_t>(header + kOffPad, t.pad_id);
  std::memcpy(header + kOffName, t.name.data(), t.name.size());
  store<uint64_t>(header + kOffModelBytes, static_cast<uint64_t>(model_.size()));
  store<uint32_t>(header + kOffFlags,
                  (header_.document_bytes_known ? kFlagDocumentBytes : 0) | (loss_mask_ ? kFlagLossMask : 0));
  out_.seekp(0);
  put(header, sizeof(header));
  out_.seekp(0, std::ios::end);
}

void write_token_file(const std::string& path, const TokenizerInfo& tokenizer,
                      const std::vector<int64_t>& tokens, const std::vector<int64_t>& document_starts,
                      std::optional<TokenDtype> dtype, const std::vector<int64_t>& document_bytes,
                      const std::string& model, const std::vector<uint8_t>& loss_mask) {
  const TokenDtype width = dtype.value_or(smallest_dtype(tokenizer.vocab_size));
  check_tokenizer_fields(tokenizer, width, path);
  const auto d = static_cast<int64_t>(document_starts.size());
  if (d == 0) throw DataError(token_file_at(path) + "refusing to write a token file with no documents");
  if (!document_bytes.empty() && static_cast<int64_t>(document_bytes.size()) != d) {
    throw DataError(token_file_at(path) + std::to_string(document_bytes.size()) +
                    " document byte counts for " + std::to_string(d) + " documents");
  }
  check_body(
      path, tokenizer, static_cast<int64_t>(tokens.size()), d, [&](int64_t i) { return tokens[i]; },
      [&](int64_t k) { return document_starts[k]; }, /*width=*/0);
  if (!loss_mask.empty()) {
    if (loss_mask.size() != tokens.size()) {
      throw DataError(token_file_at(path) + std::to_string(loss_mask.size()) + " loss mask flags for " +
                      std::to_string(tokens.size()) + " tokens");
    }
    for (int64_t k = 0; k < d; ++k) {
      if (loss_mask[document_starts[k]] != 0)
        throw DataError(token_file_at(path) + "the loss mask marks the BOS of document " + std::to_string(k) +
                        " as a label; a BOS is never one");
    }
  }
  const bool derived = document_bytes.empty() && tokenizer.name == "bytes";
  const bool known = !document_bytes.empty() || derived;
  io_as<DataError>([&] {
    write_file_atomically(path, [&](std::ostream& out) {
      TokenFileWriter writer(out, path, tokenizer, model, known, width, !loss_mask.empty());
      for (int64_t k = 0; k < d; ++k) {
        const int64_t begin = document_starts[k];
        const int64_t end = k + 1 < d ? document_starts[k + 1] : static_cast<int64_t>(tokens.size());
        const int64_t bytes = document_bytes.empty() ? end - begin - 2 : document_bytes[k];
        writer.begin_document();
        writer.append(tokens.data() + begin + 1, static_cast<size_t>(end - begin - 2),
                      loss_mask.empty() ? nullptr : loss_mask.data() + begin + 1);
        writer.end_document(bytes, loss_mask.empty() || loss_mask[end - 1] != 0);
      }
      writer.finish();
    });
  });
}

void check_same_tokenizer(const TokenizerInfo& found, const std::string& found_where,
                          const TokenizerInfo& expected, const std::string& expected_where) {
  if (found == expected) return;
  throw DataError("[token file] " + found_where + ": tokenizer " + found.describe() + " differs from " +
                  expected_where + "'s " + expected.describe() + "; encode both with the same tokenizer");
}

void check_model_vocab(const TokenFileHeader& header, const std::string& path, int64_t input_vocab,
                       int64_t output_vocab) {
  const int64_t v = header.tokenizer.vocab_size;
  if (input_vocab != v) {
    throw DataError(token_file_at(path) + "tokenizer " + header.tokenizer.name + " has vocab size " +
                    std::to_string(v) + " but model.inputs[0].vocab is " + std::to_string(input_vocab) +
                    "; set it to " + std::to_string(v));
  }
  if (output_vocab != v) {
    throw DataError(token_file_at(path) + "tokenizer " + header.tokenizer.name + " has vocab size " +
                    std::to_string(v) + " but model.output_vocab is " + std::to_string(output_vocab) +
                    "; set it to " + std::to_string(v));
  }
}

int64_t train_vocab_size(const DataConfig& data) {
  return read_token_file_header(data.train).tokenizer.vocab_size;
}

}  // namespace causal
