// Text data contracts: tokenizer, .tok files, encoding, row layouts (label shift, padding, packing) and the
// shuffled training source with its cursor.
#include <ATen/ATen.h>
#include <unistd.h>
// Torch before Catch (this block before the next): its glog macros must not replace Catch's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "data/text_batches.h"
#include "data/text_encode.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "support/byte_docs.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test case, removed at the end.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("causal_text_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

using causal::testing::write_byte_docs;

// A tokenizer whose content ids name their place: id = kBase + 1000 * document + stored offset. Batches
// built from such a file can be checked against the documents without trusting the row planner.
const TokenizerInfo kTraceTokenizer{"trace", 100000, 0, 1, 2};
constexpr int64_t kBase = 10;

int64_t trace_doc(int64_t id) { return (id - kBase) / 1000; }
int64_t trace_offset(int64_t id) { return (id - kBase) % 1000; }

// Document d has lengths[d] stored tokens: BOS, lengths[d]-2 traced content ids, EOS.
std::vector<std::vector<int64_t>> write_trace_docs(const std::string& path,
                                                   const std::vector<int64_t>& lengths) {
  std::vector<std::vector<int64_t>> docs;
  std::vector<int64_t> tokens, starts;
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int64_t> doc{kTraceTokenizer.bos_id};
    for (int64_t o = 1; o + 1 < lengths[d]; ++o) doc.push_back(kBase + 1000 * static_cast<int64_t>(d) + o);
    doc.push_back(kTraceTokenizer.eos_id);
    starts.push_back(static_cast<int64_t>(tokens.size()));
    tokens.insert(tokens.end(), doc.begin(), doc.end());
    docs.push_back(doc);
  }
  write_token_file(path, kTraceTokenizer, tokens, starts);
  return docs;
}

std::vector<int64_t> row_vec(const at::Tensor& t, int64_t r) {
  at::Tensor row = t[r].to(at::kLong).contiguous();
  return std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
}

// All rows of a file in file order, as one batch per TextEvalBatches batch.
std::vector<Batch> all_batches(const TokenFile& file, const TextRowOptions& options, int64_t batch_size = 4) {
  std::vector<Batch> out;
  for_each_eval_batch(file, options, batch_size, [&](const Batch& b) { out.push_back(b); });
  return out;
}

using ContextLabel = std::pair<std::vector<int64_t>, int64_t>;

// What the model may condition on at each loss position: the inputs of earlier-or-same positions it may
// attend to (key_valid and, when defined, the same segment), in order, with the label. Computed from the
// batch tensors alone.
std::multiset<ContextLabel> context_label_pairs(const std::vector<Batch>& batches) {
  std::multiset<ContextLabel> out;
  for (const Batch& b : batches) {
    const at::Tensor tokens = b.tokens.select(2, 0);
    for (int64_t r = 0; r < tokens.size(0); ++r) {
      const auto tok = row_vec(tokens, r), lab = row_vec(b.labels, r), valid = row_vec(b.key_valid, r);
      const auto seg =
          b.segment_ids.defined() ? row_vec(b.segment_ids, r) : std::vector<int64_t>(tok.size(), 0);
      for (size_t c = 0; c < tok.size(); ++c) {
        if (lab[c] == kIgnoreLabel) continue;
        std::vector<int64_t> context;
        for (size_t k = 0; k <= c; ++k) {
          if (valid[k] && seg[k] == seg[c]) context.push_back(tok[k]);
        }
        out.insert({context, lab[c]});
      }
    }
  }
  return out;
}

// "" when `f` throws a DataError whose message holds every needle, else what happened instead (so a
// failing check prints the actual message).
std::string refusal(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
  } catch (const DataError& e) {
    const std::string message = e.what();
    for (const std::string& n : needles) {
      if (message.find(n) == std::string::npos) return "message lacks '" + n + "': " + message;
    }
    return "";
  }
  return "no DataError";
}

template <class T>
void poke(std::string& bytes, size_t offset, T value) {
  std::memcpy(&bytes[offset], &value, sizeof(T));
}

}  // namespace

CATCH_TEST_CASE("byte tokenizer round-trips every byte and knows its specials", "[unit][text]") {
  auto tok = make_tokenizer("bytes");
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::vector<int64_t> ids = tok->encode(all);
  CATCH_REQUIRE(ids.size() == 256);
  CATCH_CHECK(ids[200] == 200);
  CATCH_CHECK(tok->decode(ids) == all);
  const TokenizerInfo& info = tok->info();
  CATCH_CHECK(info.vocab_size == 259);
  CATCH_CHECK(info.bos_id == 256);
  CATCH_CHECK(info.eos_id == 257);
  CATCH_CHECK(info.pad_id == 258);
  // Specials decode to nothing: generated text never shows BOS/EOS/PAD bytes.
  CATCH_CHECK(tok->decode({256, 'h', 'i', 257, 258}) == "hi");
  CATCH_REQUIRE_THROWS_WITH(make_tokenizer("gpt2"), Catch::Contains("unknown tokenizer 'gpt2'"));
}

// Token files read back exactly what was written, for both id widths, and the header carries the tokenizer.
CATCH_TEST_CASE("token file round trip in u16 and u32", "[contract][text]") {
  TempDir dir("roundtrip");
  const std::vector<std::string> docs = {"hello", std::string("\0\xff\x80", 3), "a longer third document"};
  for (TokenDtype dtype : {TokenDtype::kU16, TokenDtype::kU32}) {
    const std::string path = dir.file("rt_" + to_string(dtype) + ".tok");
    write_byte_docs(path, docs, dtype);
    const TokenFile f(path);
    CATCH_CHECK(f.header().dtype == dtype);
    CATCH_CHECK(f.tokenizer() == ByteTokenizer().info());
    CATCH_REQUIRE(f.num_documents() == 3);
    CATCH_CHECK(f.num_tokens() == 5 + 3 + 23 + 3 * 2);
    CATCH_CHECK(static_cast<int64_t>(fs::file_size(path)) == f.header().file_bytes());
    for (int64_t d = 0; d < 3; ++d) {
      const std::vector<int64_t> ids = f.document(d);
      CATCH_CHECK(ids.front() == 256);
      CATCH_CHECK(ids.back() == 257);
      CATCH_CHECK(ByteTokenizer().decode(ids) == docs[d]);
    }
    const TokenFileHeader h = read_token_file_header(path);
    CATCH_CHECK(h.token_count == f.num_tokens());
    CATCH_CHECK(h.document_count == 3);
    CATCH_CHECK(h.tokenizer == f.tokenizer());
    // No temp file is left behind by the atomic write.
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir.path))
      entries += e.path().string().find(".tmp") != std::string::npos;
    CATCH_CHECK(entries == 0);
  }
  // A vocabulary beyond u16 picks u32 ids by itself.
  CATCH_CHECK(smallest_dtype(65536) == TokenDtype::kU16);
  CATCH_CHECK(smallest_dtype(65537) == TokenDtype::kU32);
}

// Every kind of damaged file is refused at open with a DataError naming the file (and offset/id for ids).
CATCH_TEST_CASE("token file corruption is refused with a clear message", "[contract][text]") {
  TempDir dir("corrupt");
  const std::string good = dir.file("good.tok");
  write_byte_docs(good, {"abcdef", "ghij", "klm"});
  CATCH_REQUIRE_NOTHROW(TokenFile(good));  // guards: the damage below, not the file, is what fails
  const std::string bytes = read_bytes(good);
  const std::string bad = dir.file("bad.tok");
  // Writes `content` as bad.tok; "" when opening it fails naming the file and every needle.
  auto open_bad = [&](const std::string& content, std::vector<std::string> needles) {
    write_bytes(bad, content);
    needles.push_back(bad);
    return refusal([&] { TokenFile f(bad); }, needles);
  };
  auto header_of_bad = [&](std::vector<std::string> needles) {
    needles.push_back(bad);
    return refusal([&] { read_token_file_header(bad); }, needles);
  };

  CATCH_REQUIRE_THROWS_AS(TokenFile((write_bytes(bad, ""), bad)), DataError);
  CATCH_CHECK(open_bad("", {"empty file"}) == "");
  CATCH_CHECK(header_of_bad({"empty file"}) == "");
  CATCH_CHECK(open_bad(bytes.substr(0, 50), {"truncated header"}) == "");
  CATCH_CHECK(open_bad(bytes.substr(0, bytes.size() - 1), {"truncated or corrupt"}) == "");
  CATCH_CHECK(header_of_bad({"truncated or corrupt"}) == "");
  CATCH_CHECK(open_bad(bytes + std::string(8, '\0'), {"does not match its header"}) == "");

  std::string magic = bytes;
  magic[0] = 'X';
  CATCH_CHECK(open_bad(magic, {"magic"}) == "");
  std::string version = bytes;
  poke<uint32_t>(version, 8, 4);
  CATCH_CHECK(open_bad(version, {"format version 4"}) == "");
  std::string width = bytes;
  poke<uint32_t>(width, 12, 3);
  CATCH_CHECK(open_bad(width, {"token width 3"}) == "");
  std::string count = bytes;
  poke<uint64_t>(count, 24, uint64_t{1} << 40);  // a token count no file of this size can hold
  CATCH_CHECK(open_bad(count, {"truncated or corrupt"}) == "");

  // Token 5 (0-based) is 'e' of the first document; header 128 bytes + 5 * 2 bytes = byte 138.
  std::string id = bytes;
  poke<uint16_t>(id, 128 + 5 * 2, 300);
  CATCH_CHECK(open_bad(id, {"token id 300", "token offset 5", "byte offset 138", "vocab size 259"}) == "");

  // Offsets section: aligned after 8+6+5 = 19 u16 tokens -> 128 + 38 = 166 -> 168.
  const size_t offsets = 168;
  CATCH_REQUIRE(bytes.size() == offsets + 3 * 8 + 3 * 8);  // offsets, then the documents' byte counts
  std::string order = bytes;
  poke<uint64_t>(order, offsets + 8, 12);  // document 1 now starts after document 2 (at 14)
  poke<uint64_t>(order, offsets + 16, 8);
  CATCH_CHECK(open_bad(order, {"not increasing"}) == "");
  std::string first = bytes;
  poke<uint64_t>(first, offsets, 1);
  CATCH_CHECK(open_bad(first, {"must start at 0"}) == "");
  std::string past = bytes;
  poke<uint64_t>(past, offsets + 16, 500);
  CATCH_CHECK(open_bad(past, {"past the 19 tokens"}) == "");
  std::string boundary = bytes;
  poke<uint64_t>(boundary, offsets + 8, 7);  // document 1 would start at document 0's last byte, not BOS
  CATCH_CHECK(open_bad(boundary, {"not EOS"}) == "");

  CATCH_REQUIRE_THROWS_WITH(TokenFile(dir.file("missing.tok")),
                            Catch::Contains("missing.tok") && Catch::Contains("cannot open"));

  // A version 2 file is a version 3 file without a loss mask: it opens, and a mask flag in it is unknown.
  std::string v2 = bytes;
  poke<uint32_t>(v2, 8, 2);
  CATCH_CHECK(open_bad(v2, {}) != "");
  CATCH_CHECK(TokenFile(bad).header().version == 2);
  poke<uint32_t>(v2, 104, 3);
  CATCH_CHECK(open_bad(v2, {"unknown flags 3"}) == "");

  // The loss mask section: 19 flags after the byte counts, padded to 24.
  const std::string masked_path = dir.file("masked.tok");
  ByteTokenizer tok;
  const std::vector<int64_t> ids = {256, 'a', 'b', 257, 256, 'c', 257};
  write_token_file(masked_path, tok.info(), ids, {0, 4}, std::nullopt, {}, "", {0, 0, 1, 1, 0, 1, 1});
  const TokenFile masked(masked_path);
  CATCH_CHECK(masked.header().loss_mask);
  CATCH_CHECK(masked.supervised_labels() == 4);
  CATCH_CHECK_FALSE(masked.supervised(1));
  CATCH_CHECK(masked.supervised(2));
  const std::string mask_bytes = read_bytes(masked_path);
  const size_t mask = 144 + 2 * 8 + 2 * 8;  // 7 u16 ids end at 142 -> offsets at 144
  CATCH_REQUIRE(mask_bytes.size() == mask + 8);
  std::string flag = mask_bytes;
  flag[mask + 2] = 2;
  CATCH_CHECK(open_bad(flag, {"loss mask byte 2", "token offset 2"}) == "");
  std::string bos = mask_bytes;
  bos[mask + 4] = 1;
  CATCH_CHECK(open_bad(bos, {"BOS of document 1"}) == "");
  std::string tail = mask_bytes;
  tail[mask + 7] = 1;
  CATCH_CHECK(open_bad(tail, {"padding is not zero"}) == "");
  CATCH_CHECK_THROWS_WITH(write_token_file(dir.file("w.tok"), tok.info(), ids, {0, 4}, std::nullopt, {}, "",
                                           {1, 0, 1, 1, 0, 1, 1}),
                          Catch::Contains("BOS of document 0"));
  CATCH_CHECK_FALSE(fs::exists(dir.file("w.tok")));
}

// The writer refuses contents the reader would refuse, so a bad file is never produced.
CATCH_TEST_CASE("token file writer checks its contents first", "[unit][text]") {
  TempDir dir("writer");
  const TokenizerInfo info = ByteTokenizer().info();
  const std::string path = dir.file("w.tok");
  CATCH_REQUIRE_THROWS_WITH(write_token_file(path, info, {256, 300, 257}, {0}),
                            Catch::Contains("token id 300"));
  CATCH_REQUIRE_THROWS_WITH(write_token_file(path, info, {256, 257}, {}), Catch::Contains("no documents"));
  CATCH_REQUIRE_THROWS_WITH(write_token_file(path, info, {97, 257}, {0}), Catch::Contains("not BOS"));
  CATCH_CHECK(!fs::exists(path));
}

// Where files meet, their tokenizers and the model's vocab must agree.
CATCH_TEST_CASE("tokenizer identity and vocab are checked where they meet", "[unit][text]") {
  const TokenizerInfo bytes = ByteTokenizer().info();
  CATCH_REQUIRE_NOTHROW(check_same_tokenizer(bytes, "a.tok", bytes, "b.tok"));
  CATCH_REQUIRE_THROWS_WITH(
      check_same_tokenizer(kTraceTokenizer, "val.tok", bytes, "train.tok"),
      Catch::Contains("val.tok") && Catch::Contains("train.tok") && Catch::Contains("trace"));
  TokenFileHeader h;
  h.tokenizer = bytes;
  CATCH_REQUIRE_NOTHROW(check_model_vocab(h, "x.tok", 259, 259));
  CATCH_REQUIRE_THROWS_WITH(check_model_vocab(h, "x.tok", 256, 259),
                            Catch::Contains("model.inputs[0].vocab is 256"));
  CATCH_REQUIRE_THROWS_WITH(check_model_vocab(h, "x.tok", 259, 300),
                            Catch::Contains("model.output_vocab is 300"));
}

// Label shift happens exactly once: [BOS,a,b,c,EOS] in the file -> inputs [BOS,a,b,c], labels [a,b,c,EOS].
CATCH_TEST_CASE("label shift happens exactly once, file to batch, both layouts", "[contract][text]") {
  TempDir dir("shift");
  const std::string path = dir.file("abc.tok");
  write_byte_docs(path, {"abc"});
  const TokenFile file(path);
  CATCH_REQUIRE(file.document(0) == std::vector<int64_t>{256, 'a', 'b', 'c', 257});
  for (TextLayout layout : {TextLayout::kPacked, TextLayout::kPadded}) {
    for (bool isolate : {true, false}) {
      const TextRowOptions options{6, layout, isolate};
      const std::vector<Batch> batches = all_batches(file, options);
      CATCH_REQUIRE(batches.size() == 1);
      const Batch& b = batches[0];
      CATCH_REQUIRE(b.tokens.sizes().vec() == std::vector<int64_t>{1, 6, 1});
      CATCH_CHECK(row_vec(b.tokens.select(2, 0), 0) == std::vector<int64_t>{256, 'a', 'b', 'c', 258, 258});
      CATCH_CHECK(row_vec(b.labels, 0) ==
                  std::vector<int64_t>{'a', 'b', 'c', 257, kIgnoreLabel, kIgnoreLabel});
      CATCH_CHECK(row_vec(b.positions, 0) == std::vector<int64_t>{0, 1, 2, 3, 0, 0});
      CATCH_CHECK(row_vec(b.key_valid, 0) == std::vector<int64_t>{1, 1, 1, 1, 0, 0});
      CATCH_CHECK(b.valid_tokens() == 4);
      CATCH_CHECK(b.segment_ids.defined() == (layout == TextLayout::kPacked && isolate));
    }
  }
}

// Padding is out of attention and out of the loss: PAD positions have key_valid false and label -100, and
// each row's valid labels are exactly the (n-1) pairs of its documents.
CATCH_TEST_CASE("padding positions are masked out of keys and loss", "[contract][text]") {
  TempDir dir("padding");
  const std::string path = dir.file("pad.tok");
  const std::vector<int64_t> lengths = {4, 7, 3, 9, 3, 5, 8, 6};  // all fit T = 8 pairs
  write_trace_docs(path, lengths);
  const TokenFile file(path);
  for (TextLayout layout : {TextLayout::kPacked, TextLayout::kPadded}) {
    const TextRowOptions options{8, layout, true};
    int64_t pad_positions = 0, multi_doc_rows = 0, total_valid = 0;
    for (const Batch& b : all_batches(file, options, 3)) {
      const at::Tensor tok = b.tokens.select(2, 0);
      for (int64_t r = 0; r < tok.size(0); ++r) {
        const auto t = row_vec(tok, r), lab = row_vec(b.labels, r), valid = row_vec(b.key_valid, r),
                   pos = row_vec(b.positions, r);
        std::set<int64_t> docs;
        int64_t valid_labels = 0;
        for (size_t c = 0; c < t.size(); ++c) {
          if (!valid[c]) {
            ++pad_positions;
            CATCH_CHECK(lab[c] == kIgnoreLabel);
            CATCH_CHECK(t[c] == kTraceTokenizer.pad_id);
            CATCH_CHECK(pos[c] == 0);
            if (b.segment_ids.defined()) CATCH_CHECK(row_vec(b.segment_ids, r)[c] == 0);
            continue;
          }
          CATCH_CHECK(lab[c] != kIgnoreLabel);  // every real input has a label
          ++valid_labels;
          // The label names the document (the input may be a BOS shared by all documents).
          if (lab[c] != kTraceTokenizer.eos_id) docs.insert(trace_doc(lab[c]));
        }
        int64_t expected = 0;
        for (int64_t d : docs) expected += lengths[d] - 1;
        CATCH_CHECK(valid_labels == expected);
        multi_doc_rows += docs.size() > 1;
        total_valid += valid_labels;
      }
    }
    int64_t pairs = 0;
    for (int64_t n : lengths) pairs += n - 1;
    CATCH_CHECK(total_valid == pairs);
    CATCH_CHECK(pad_positions > 0);  // guards: there was padding to check
    if (layout == TextLayout::kPacked) CATCH_CHECK(multi_doc_rows > 0);
  }
}

// Packing: no label crosses a document boundary, positions restart at 0 per piece, a long document is
// split into pieces of T pairs that are each their own segment.
CATCH_TEST_CASE("packed rows keep documents apart and split only long ones", "[contract][text]") {
  TempDir dir("packing");
  const std::string path = dir.file("pack.tok");
  const int64_t t = 8;
  // Document 3 has 21 pairs: pieces of 8, 8 and 5.
  const std::vector<int64_t> lengths = {4, 3, 6, 22, 5, 9, 3, 3};
  const auto docs = write_trace_docs(path, lengths);
  const TokenFile file(path);
  for (bool isolate : {true, false}) {
    const TextRowOptions options{t, TextLayout::kPacked, isolate};
    std::set<std::tuple<int64_t, int64_t, int64_t>> doc3_pieces;  // (batch, row, segment)
    std::set<std::pair<int64_t, int64_t>> seen_pairs;             // (document, stored offset of the input)
    int64_t rows_with_two_docs = 0, batch_index = 0;
    for (const Batch& b : all_batches(file, options, 2)) {
      CATCH_CHECK(b.segment_ids.defined() == isolate);
      const at::Tensor tok = b.tokens.select(2, 0);
      for (int64_t r = 0; r < tok.size(0); ++r) {
        const auto in = row_vec(tok, r), lab = row_vec(b.labels, r), pos = row_vec(b.positions, r),
                   valid = row_vec(b.key_valid, r);
        const auto seg = isolate ? row_vec(b.segment_ids, r) : std::vector<int64_t>(in.size(), 0);
        std::map<int64_t, std::set<std::pair<int64_t, int64_t>>>
            pieces_by_segment;  // segment -> (doc, piece)
        std::set<int64_t> row_docs;
        for (size_t c = 0; c < in.size(); ++c) {
          if (!valid[c]) continue;
          // Which document and stored offset this input is, from the ids alone.
          const int64_t doc = in[c] == kTraceTokenizer.bos_id ? trace_doc(lab[c]) : trace_doc(in[c]);
          const int64_t offset = in[c] == kTraceTokenizer.bos_id ? 0 : trace_offset(in[c]);
          // The label is the next stored token of the same document: never another document's token.
          CATCH_CHECK(lab[c] == docs[doc][offset + 1]);
          CATCH_CHECK(pos[c] == offset % t);  // restarts at 0 for every document and every piece
          CATCH_CHECK(seen_pairs.insert({doc, offset}).second);  // each pair exactly once
          row_docs.insert(doc);
          pieces_by_segment[seg[c]].insert({doc, offset / t});
          if (doc == 3 && isolate) doc3_pieces.insert({batch_index, r, seg[c]});
        }
        if (isolate) {
          // A segment is exactly one piece, and no two pieces share a segment.
          std::set<std::pair<int64_t, int64_t>> all;
          for (const auto& [s, pieces] : pieces_by_segment) {
            CATCH_CHECK(s >= 1);
            CATCH_CHECK(pieces.size() == 1);
            all.insert(pieces.begin(), pieces.end());
          }
          CATCH_CHECK(all.size() == pieces_by_segment.size());
        }
        rows_with_two_docs += row_docs.size() > 1;
      }
      ++batch_index;
    }
    int64_t pairs = 0;
    for (int64_t n : lengths) pairs += n - 1;
    CATCH_CHECK(static_cast<int64_t>(seen_pairs.size()) == pairs);
    CATCH_CHECK(rows_with_two_docs > 0);  // guards: documents really were packed together
    if (isolate) CATCH_CHECK(doc3_pieces.size() == 3);
  }
}

// Packed+isolated and padded layouts give the model exactly the same (context, label) pairs; both equal an
// independent reference built from the documents; without isolation the contexts differ (the comparison
// can see leakage).
CATCH_TEST_CASE("packed and padded layouts see the same context-label pairs", "[contract][text]") {
  TempDir dir("equivalence");
  const std::string path = dir.file("eq.tok");
  const int64_t t = 8;
  const std::vector<int64_t> lengths = {5, 3, 9, 2, 7, 4, 6, 3, 8, 20};  // the last is split into 8+8+3
  const auto docs = write_trace_docs(path, lengths);
  const TokenFile file(path);
  std::multiset<ContextLabel> reference;
  for (const auto& doc : docs) {
    for (size_t j = 0; j + 1 < doc.size(); ++j) {
      const size_t piece_begin = (j / t) * t;
      reference.insert({std::vector<int64_t>(doc.begin() + piece_begin, doc.begin() + j + 1), doc[j + 1]});
    }
  }
  const auto packed_batches = all_batches(file, {t, TextLayout::kPacked, true});
  const auto padded_batches = all_batches(file, {t, TextLayout::kPadded, true});
  const auto packed = context_label_pairs(packed_batches);
  const auto padded = context_label_pairs(padded_batches);
  CATCH_REQUIRE(!reference.empty());
  CATCH_CHECK(packed == reference);
  CATCH_CHECK(padded == reference);
  CATCH_CHECK(TextEvalBatches(file, {t, TextLayout::kPacked, true}, 1).num_rows() <
              TextEvalBatches(file, {t, TextLayout::kPadded, true}, 1).num_rows());
  CATCH_CHECK(context_label_pairs(all_batches(file, {t, TextLayout::kPacked, false})) != reference);
}

// Evaluation sees every row once, in file order, with a smaller last batch instead of empty rows.
CATCH_TEST_CASE("eval batches cover the file once in order", "[unit][text]") {
  TempDir dir("eval");
  const std::string path = dir.file("eval.tok");
  const auto docs = write_trace_docs(path, {5, 6, 4, 7, 3});
  const TokenFile file(path);
  const TextEvalBatches eval(file, {4, TextLayout::kPadded, true}, 3);
  // pairs 4,5,3,6,2 at T=4 -> pieces 1,2,1,2,1 = 7 rows -> batches of 3,3,1.
  CATCH_REQUIRE(eval.num_rows() == 7);
  CATCH_REQUIRE(eval.num_batches() == 3);
  CATCH_CHECK(eval.batch(2).labels.size(0) == 1);
  CATCH_CHECK(row_vec(eval.batch(0).labels, 0)[0] == docs[0][1]);
  CATCH_CHECK(row_vec(eval.batch(2).labels, 0)[0] == docs[4][1]);
  int64_t valid = 0;
  for (int64_t i = 0; i < eval.num_batches(); ++i) valid += eval.batch(i).valid_tokens();
  CATCH_CHECK(valid == file.num_tokens() - file.num_documents());
  CATCH_REQUIRE_THROWS_AS(eval.batch(3), DataError);
}

CATCH_TEST_CASE("document splitting and separators", "[unit][text]") {
  CATCH_CHECK(split_documents("a|b||c|", "|") == std::vector<std::string>{"a", "b", "c"});
  CATCH_CHECK(split_documents("one\n\ntwo\n\n \n\nthree\n", "\n\n") ==
              std::vector<std::string>{"one", "two", "three\n"});
  CATCH_CHECK(split_documents("whole\n\nfile", "") == std::vector<std::string>{"whole\n\nfile"});
  CATCH_CHECK(split_documents(" \n\t", "").empty());
  CATCH_CHECK(unescape_separator("\\n\\n") == "\n\n");
  CATCH_CHECK(unescape_separator("<doc>") == "<doc>");
  CATCH_CHECK(unescape_separator("a\\\\b\\t") == "a\\b\t");
  CATCH_REQUIRE_THROWS_AS(unescape_separator("\\q"), DataError);
  CATCH_REQUIRE_THROWS_AS(unescape_separator("end\\"), DataError);
}

// Validation is split by whole documents (never inside one), deterministically, and encoding is
// byte-for-byte reproducible.
CATCH_TEST_CASE("encode splits validation by whole documents, deterministically", "[contract][text]") {
  TempDir dir("encode");
  std::vector<std::string> inputs, texts;
  for (int i = 0; i < 10; ++i) {
    texts.push_back("document number " + std::to_string(i) + std::string(static_cast<size_t>(i), '!'));
    inputs.push_back(dir.file("in" + std::to_string(i) + ".txt"));
    write_text(inputs.back(), texts.back());
  }
  EncodeOptions opt;
  opt.inputs = inputs;
  opt.out = dir.file("a.train.tok");
  opt.val_out = dir.file("a.val.tok");
  opt.val_fraction = 0.2;
  const std::string summary = encode_text_files(opt);
  CATCH_CHECK(summary.find("10 document(s)") != std::string::npos);
  const TokenFile train(opt.out), val(opt.val_out);
  CATCH_REQUIRE(train.num_documents() == 8);
  CATCH_REQUIRE(val.num_documents() == 2);
  std::multiset<std::string> got;
  ByteTokenizer tok;
  for (const TokenFile* f : {&train, &val}) {
    for (int64_t d = 0; d < f->num_documents(); ++d) got.insert(tok.decode(f->document(d)));
  }
  // Every input document comes back whole in exactly one of the two files.
  CATCH_CHECK(got == std::multiset<std::string>(texts.begin(), texts.end()));
  // Spread over the order, not the tail: documents 2 and 7 of 10.
  CATCH_CHECK(tok.decode(val.document(0)) == texts[2]);
  CATCH_CHECK(tok.decode(val.document(1)) == texts[7]);

  EncodeOptions again = opt;
  again.out = dir.file("b.train.tok");
  again.val_out = dir.file("b.val.tok");
  encode_text_files(again);
  CATCH_CHECK(read_bytes(opt.out) == read_bytes(again.out));
  CATCH_CHECK(read_bytes(opt.val_out) == read_bytes(again.val_out));

  // A separator turns one file into several documents; the split still never cuts one.
  const std::string joined = dir.file("joined.txt");
  write_text(joined, "alpha\n\nbeta\n\n\n\ngamma\n\ndelta");
  EncodeOptions sep;
  sep.inputs = {joined};
  sep.out = dir.file("sep.tok");
  sep.doc_separator = "\\n\\n";
  encode_text_files(sep);
  const TokenFile s(sep.out);
  CATCH_REQUIRE(s.num_documents() == 4);
  CATCH_CHECK(tok.decode(s.document(1)) == "beta");
  CATCH_CHECK(tok.decode(s.document(3)) == "delta");

  EncodeOptions bad = opt;
  bad.val_fraction = 1.0;
  CATCH_REQUIRE_THROWS_AS(encode_text_files(bad), DataError);
  bad = sep;
  bad.val_out = dir.file("sep.val.tok");
  bad.val_fraction = 0.9;  // 4 documents: nothing would be left to train on
  CATCH_REQUIRE_THROWS_WITH(encode_text_files(bad), Catch::Contains("no training document"));
  bad = opt;
  bad.val_out.clear();  // a fraction without a file to put it in
  CATCH_REQUIRE_THROWS_AS(encode_text_files(bad), DataError);
  bad = opt;
  bad.inputs.push_back(dir.file("nope.txt"));
  CATCH_REQUIRE_THROWS_WITH(encode_text_files(bad), Catch::Contains("nope.txt"));
  bad = opt;
  bad.tokenizer = "gpt2";
  CATCH_REQUIRE_THROWS_AS(encode_text_files(bad), DataError);
}

CATCH_TEST_CASE("inspect prints header and length statistics", "[unit][text]") {
  TempDir dir("inspect");
  const std::string path = dir.file("i.tok");
  write_byte_docs(path, {"ab", "abcdef", "abcd"});  // 4, 8, 6 stored tokens
  const std::string text = inspect_token_file(path);
  CATCH_CHECK(text.find("documents   3") != std::string::npos);
  CATCH_CHECK(text.find("tokens      18 (15 (input, label) pairs)") != std::string::npos);
  CATCH_CHECK(text.find("min 4, median 6, mean 6.0, p90 8, max 8") != std::string::npos);
  CATCH_CHECK(text.find("bytes (vocab 259; bos 256, eos 257, pad 258)") != std::string::npos);
  CATCH_CHECK(text.find("u16") != std::string::npos);
  CATCH_CHECK(text.find("first doc   \"ab\"") != std::string::npos);
}

// Training batches are a pure function of (file, options, seed, cursor): same seed -> same batches,
// a restored cursor continues identically (across epoch ends), a different seed -> a different order.
CATCH_TEST_CASE("text batch source is deterministic and resumable", "[contract][text]") {
  TempDir dir("source");
  const std::string path = dir.file("src.tok");
  std::vector<int64_t> lengths;
  for (int i = 0; i < 12; ++i) lengths.push_back(3 + (i * 5) % 9);
  write_trace_docs(path, lengths);
  const TextRowOptions options{6, TextLayout::kPacked, true};
  auto take = [](TextBatchSource& s, int n) {
    std::vector<Batch> out;
    for (int i = 0; i < n; ++i) out.push_back(s.next());
    return out;
  };
  auto same = [](const std::vector<Batch>& a, const std::vector<Batch>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].tokens.equal(b[i].tokens) || !a[i].labels.equal(b[i].labels) ||
          !a[i].positions.equal(b[i].positions) || !a[i].segment_ids.equal(b[i].segment_ids) ||
          !a[i].key_valid.equal(b[i].key_valid)) {
        return false;
      }
    }
    return true;
  };

  TextBatchSource a(TokenFile(path), options, 3, 7);
  TextBatchSource b(TokenFile(path), options, 3, 7);
  const int64_t rows = a.rows_in_epoch();
  CATCH_REQUIRE(rows < 3 * 10);  // guards: the run below crosses at least one epoch end
  CATCH_CHECK(same(take(a, 10), take(b, 10)));
  CATCH_CHECK(a.cursor().epoch >= 1);

  TextBatchSource c(TokenFile(path), options, 3, 7);
  take(c, 3);
  const nlohmann::json saved = cursor_to_json(c.cursor());
  const auto continued = take(c, 8);
  TextBatchSource d(TokenFile(path), options, 3, /*seed=*/99);  // the cursor's seed wins
  d.restore(cursor_from_json(saved));
  CATCH_CHECK(d.cursor() == cursor_from_json(saved));
  CATCH_CHECK(same(take(d, 8), continued));

  TextBatchSource e(TokenFile(path), options, 3, 8);
  TextBatchSource f(TokenFile(path), options, 3, 7);
  CATCH_CHECK(!same(take(e, 4), take(f, 4)));
  CATCH_CHECK(epoch_order(12, 7, 0) != epoch_order(12, 7, 1));  // a new order every epoch

  // One epoch serves every (input, label) pair exactly once, whatever the order.
  TextBatchSource g(TokenFile(path), options, 1, 5);
  std::set<std::pair<int64_t, int64_t>> served;  // unique per document: content ids name their document
  const int64_t epoch_rows = g.rows_in_epoch();
  for (int64_t i = 0; i < epoch_rows; ++i) {
    const Batch bt = g.next();
    const auto in = row_vec(bt.tokens.select(2, 0), 0), lab = row_vec(bt.labels, 0);
    for (size_t k = 0; k < in.size(); ++k) {
      if (lab[k] != kIgnoreLabel) served.insert({in[k], lab[k]});
    }
  }
  int64_t pairs = 0;
  for (int64_t n : lengths) pairs += n - 1;
  CATCH_CHECK(static_cast<int64_t>(served.size()) == pairs);
  CATCH_CHECK(g.cursor().epoch == 0);
  CATCH_CHECK(g.cursor().position == epoch_rows);

  TextCursor beyond{0, rows + 1, 7};
  CATCH_REQUIRE_THROWS_AS(a.restore(beyond), DataError);
  CATCH_REQUIRE_THROWS_AS(cursor_from_json(nlohmann::json{{"epoch", 1}}), DataError);
  CATCH_REQUIRE_THROWS_AS(cursor_from_json(nlohmann::json{{"epoch", 1}, {"position", "x"}, {"seed", 3}}),
                          DataError);
}

// The bundled Brown sample is real text that encodes offline, as the default text config needs.
CATCH_TEST_CASE("bundled Brown sample encodes", "[unit][text]") {
  TempDir dir("brown");
  std::vector<std::string> inputs;
  for (const auto& e : fs::directory_iterator(fs::path(CAUSAL_SOURCE_DIR) / "data" / "brown-sample")) {
    if (e.path().extension() == ".txt") inputs.push_back(e.path().string());
  }
  std::sort(inputs.begin(), inputs.end());
  CATCH_REQUIRE(inputs.size() >= 10);
  EncodeOptions opt;
  opt.inputs = inputs;
  opt.out = dir.file("brown.train.tok");
  opt.val_out = dir.file("brown.val.tok");
  opt.val_fraction = 0.1;
  opt.doc_separator = "\\n\\n";
  encode_text_files(opt);
  const TokenFile train(opt.out), val(opt.val_out);
  CATCH_CHECK(train.num_documents() > 100);
  CATCH_CHECK(val.num_documents() > 10);
  const int64_t bytes =
      train.num_tokens() + val.num_tokens() - 2 * (train.num_documents() + val.num_documents());
  CATCH_CHECK(bytes > 150000);
  CATCH_CHECK(bytes < 400000);
  CATCH_CHECK(inspect_token_file(opt.out).find("first doc   \"The Fulton County Grand Jury") !=
              std::string::npos);
}
