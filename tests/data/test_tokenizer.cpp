// Subword tokenizers and token files from elsewhere: SentencePiece round trips (byte fallback), specials,
// identity checks, token file v2 (byte counts, embedded model) and v1 compatibility, streaming encode under
// a memory cap, nanoGPT / llm.c imports against readers written here, and "vocab": "auto".
#include <ATen/ATen.h>
#include <unistd.h>
// Torch before Catch (this block before the next): its glog macros must not replace Catch's.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/config_io.h"
#include "core/errors.h"
#include "data/sentencepiece_backend.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/text_encode.h"
#include "data/token_file.h"
#include "data/token_import.h"
#include "data/tokenizer.h"
#include "io/sha256.h"
#include "support/scratch_dir.h"
#include "support/sentencepiece.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

// A scratch directory with file names inside it.
struct TokDir : testing::ScratchDir {
  explicit TokDir(const std::string& name) : ScratchDir("tok_" + name) {}
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void put_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string get_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// English-like lines with a little UTF-8, so that a tiny vocabulary learns real merges.
std::string corpus_text(int lines, uint32_t seed) {
  const std::vector<std::string> words = {"the", "cat",   "sat", "on",   "mat",   "a",   "dog",  "ran",
                                          "to",  "house", "and", "café", "naïve", "zoë", "over", "hill"};
  std::mt19937 rng(seed);
  std::string text;
  for (int l = 0; l < lines; ++l) {
    const int n = 3 + static_cast<int>(rng() % 9);
    for (int w = 0; w < n; ++w) text += (w ? " " : "") + words[rng() % words.size()];
    text += l % 7 == 6 ? ".\n\n" : ".\n";
  }
  return text;
}

// One small BPE model for the whole binary (training takes well under a second).
const std::string& tiny_model_path() {
  static const std::string path = [] {
    const fs::path dir = fs::temp_directory_path() / ("causal_tok_model_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    put_file((dir / "corpus.txt").string(), corpus_text(400, 1));
    TokenizerTrainOptions o;
    o.inputs = {(dir / "corpus.txt").string()};
    o.vocab_size = 300;
    o.out = (dir / "tiny.model").string();
    o.threads = 1;
    train_tokenizer(o);
    return o.out;
  }();
  return path;
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

}  // namespace

CATCH_TEST_CASE("tokenizer train reserves specials, turns byte fallback on and learns merges",
                "[unit][tokenizer]") {
  CAUSAL_SKIP_WITHOUT_SENTENCEPIECE();
  const auto tok = load_sentencepiece(tiny_model_path());
  const TokenizerInfo& info = tok->info();
  CATCH_CHECK(info.name == "sentencepiece");
  CATCH_CHECK(info.vocab_size == 300);
  CATCH_CHECK(info.bos_id == 0);
  CATCH_CHECK(info.eos_id == 1);
  CATCH_CHECK(info.pad_id == 2);
  CATCH_CHECK(info.model_sha256 == sha256_file(tiny_model_path()));
  // Learned merges: common words take fewer ids than bytes (guards against a bytes-only model).
  const std::string text = "the cat sat on the mat";
  CATCH_CHECK(tok->encode(text).size() < text.size());
}

CATCH_TEST_CASE("sentencepiece round-trips any UTF-8 and invalid bytes exactly (byte fallback)",
                "[contract][tokenizer]") {
  CAUSAL_SKIP_WITHOUT_SENTENCEPIECE();
  const auto tok = load_sentencepiece(tiny_model_path());
  std::mt19937 rng(7);
  std::vector<std::string> texts = {
      "",
      "the cat",
      "  two  spaces\tand tab\n\nnewlines\r\n",
      "caf\xC3\xA9 \xE2\x96\x81 lower one eighth",
      "emoji \xF0\x9F\x98\x80 and CJK \xE4\xB8\xAD\xE6\x96\x87",
      std::string("nul\0byte", 8),
      "\xFF\xFE invalid \xC3 truncated \xE2\x82 overlong \xC0\xAF surrogate \xED\xA0\x80"};
  for (int i = 0; i < 50; ++i) texts.push_back(random_bytes(rng, 1 + rng() % 64));
  for (int i = 0; i < 20; ++i) texts.push_back(corpus_text(3, 100 + i));
  for (const std::string& text : texts) {
    const std::vector<int64_t> ids = tok->encode(text);
    CATCH_CHECK(tok->decode(ids) == text);
  }
  // Guards against a vacuous pass: invalid bytes did go through byte pieces.
  const std::vector<int64_t> ids = tok->encode("\xFF");
  CATCH_REQUIRE(ids.size() == 1);
  CATCH_CHECK(tok->decode(ids) == "\xFF");
}

CATCH_TEST_CASE("specials are never produced by encoding text", "[contract][tokenizer]") {
  CAUSAL_SKIP_WITHOUT_SENTENCEPIECE();
  const auto tok = load_sentencepiece(tiny_model_path());
  const TokenizerInfo& info = tok->info();
  std::mt19937 rng(3);
  // Text that spells the special pieces out must still encode as ordinary pieces.
  std::vector<std::string> texts = {"<s></s><pad><unk>", "<0x41> <s>", corpus_text(50, 9)};
  for (int i = 0; i < 100; ++i) texts.push_back(random_bytes(rng, 200));
  for (const std::string& text : texts) {
    for (int64_t id : tok->encode(text)) {
      CATCH_REQUIRE(id != info.bos_id);
      CATCH_REQUIRE(id != info.eos_id);
      CATCH_REQUIRE(id != info.pad_id);
      CATCH_REQUIRE(id != 3);  // UNK: byte fallback leaves nothing unknown
      CATCH_REQUIRE(id < info.vocab_size);
    }
  }
}

CATCH_TEST_CASE("encode records the tokenizer, its model and each document's bytes",
                "[contract][tokenizer]") {
  CAUSAL_SKIP_WITHOUT_SENTENCEPIECE();
  TokDir dir("encode_spm");
  const std::string text = corpus_text(120, 5);
  put_file(dir.file("in.txt"), text);
  EncodeOptions o;
  o.inputs = {dir.file("in.txt")};
  o.tokenizer = tiny_model_path();
  o.out = dir.file("train.tok");
  o.val_out = dir.file("val.tok");
  o.val_fraction = 0.2;
  o.doc_separator = "\\n\\n";
  encode_text(o);
  const TokenFile train(o.out), val(o.val_out);
  const auto tok = load_sentencepiece(tiny_model_path());
  CATCH_CHECK(train.tokenizer() == tok->info());
  CATCH_CHECK(train.tokenizer().model_sha256 == sha256_file(tiny_model_path()));
  CATCH_CHECK(train.tokenizer_model() == get_file(tiny_model_path()));
  CATCH_CHECK(train.header().version == kTokenFileVersion);
  CATCH_REQUIRE(train.header().document_bytes_known);
  // Every document decodes to its text, and its recorded byte count is that text's length.
  const std::vector<std::string> docs = split_documents(text, "\n\n");
  const std::vector<bool> is_val = choose_validation_documents(static_cast<int64_t>(docs.size()), 0.2);
  int64_t t = 0, v = 0, bytes = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    const TokenFile& f = is_val[d] ? val : train;
    const int64_t k = is_val[d] ? v++ : t++;
    std::vector<int64_t> ids = f.document(k);
    CATCH_CHECK(tok->decode(ids) == docs[d]);
    CATCH_CHECK(f.document_bytes(k) == static_cast<int64_t>(docs[d].size()));
    bytes += f.document_bytes(k);
  }
  CATCH_CHECK(t == train.num_documents());
  CATCH_CHECK(v == val.num_documents());
  // The documents and the separators between them are the whole text.
  CATCH_CHECK(bytes + static_cast<int64_t>(2 * (docs.size() - 1)) == static_cast<int64_t>(text.size()));
  // The recorded tokenizer rebuilds from the file alone.
  CATCH_CHECK(tokenizer_for(train.tokenizer(), train.tokenizer_model())->decode(train.document(0)) ==
              tok->decode(train.document(0)));
}

CATCH_TEST_CASE("a tokenizer mismatch between files is refused naming both sides", "[contract][tokenizer]") {
  CAUSAL_SKIP_WITHOUT_SENTENCEPIECE();
  TokDir dir("mismatch");
  put_file(dir.file("in.txt"), corpus_text(20, 2));
  EncodeOptions o;
  o.inputs = {dir.file("in.txt")};
  o.tokenizer = tiny_model_path();
  o.out = dir.file("spm.tok");
  encode_text(o);
  o.tokenizer = "bytes";
  o.out = dir.file("bytes.tok");
  encode_text(o);
  // Another model of the same vocab size differs only in its sha256: still refused.
  TokenizerTrainOptions t;
  t.inputs = {dir.file("in.txt")};
  t.vocab_size = 300;
  t.out = dir.file("other.model");
  t.threads = 1;
  train_tokenizer(t);
  o.tokenizer = t.out;
  o.out = dir.file("other.tok");
  encode_text(o);
  const TokenFile spm(dir.file("spm.tok")), bytes(dir.file("bytes.tok")), other(dir.file("other.tok"));
  CATCH_CHECK_NOTHROW(check_same_tokenizer(spm.tokenizer(), "a", spm.tokenizer(), "b"));
  CATCH_CHECK_THROWS_WITH(check_same_tokenizer(bytes.tokenizer(), "val.tok", spm.tokenizer(), "train.tok"),
                          Catch::Contains("val.tok") && Catch::Contains("train.tok") &&
                              Catch::Contains("bytes (vocab 259") && Catch::Contains("sentencepiece (vocab"));
  CATCH_REQUIRE(other.tokenizer().vocab_size == spm.tokenizer().vocab_size);
  CATCH_CHECK_THROWS_AS(check_same_tokenizer(other.tokenizer(), "val", spm.tokenizer(), "train"), DataError);
  CATCH_CHECK_THROWS_AS(check_model_vocab(spm.header(), "spm.tok", 259, 259), DataError);
}

CATCH_TEST_CASE("streaming encode of a file larger than the memory cap", "[contract][tokenizer]") {
  TokDir dir("stream");
  // ~3 MB: three times the 1 MiB cap, in documents of a few KB and one large document of ~1.5 MB.
  std::string text = corpus_text(60000, 11);
  std::string big;
  while (big.size() < 1'500'000) big += corpus_text(50, static_cast<uint32_t>(big.size()));
  for (size_t at = 0; (at = big.find("\n\n", at)) != std::string::npos;) big.replace(at, 2, "\n");
  text += "\n\n" + big;
  put_file(dir.file("big.txt"), text);
  CATCH_REQUIRE(text.size() > 3 * (size_t{1} << 20));
  std::vector<std::string> tokenizers = {"bytes"};
  if (sentencepiece_available()) tokenizers.push_back(tiny_model_path());
  for (const std::string& tokenizer : tokenizers) {
    EncodeOptions o;
    o.inputs = {dir.file("big.txt")};
    o.tokenizer = tokenizer;
    o.doc_separator = "\\n\\n";
    o.memory_cap_bytes = int64_t{1} << 20;
    o.threads = 2;
    o.out = dir.file("capped.tok");
    const EncodeResult capped = encode_text(o);
    CATCH_CHECK(capped.peak_buffered_bytes > 0);
    CATCH_CHECK(capped.peak_buffered_bytes <= o.memory_cap_bytes);
    // The same files as with everything in memory on one thread.
    o.memory_cap_bytes = int64_t{1} << 30;
    o.threads = 1;
    o.out = dir.file("whole.tok");
    const EncodeResult whole = encode_text(o);
    CATCH_CHECK(whole.peak_buffered_bytes > o.memory_cap_bytes / 1024);  // guards: really held more
    CATCH_CHECK(get_file(dir.file("capped.tok")) == get_file(dir.file("whole.tok")));
    // And they decode to the input documents.
    const TokenFile f(dir.file("capped.tok"));
    const auto tok = tokenizer_for(f.tokenizer(), f.tokenizer_model());
    const std::vector<std::string> docs = split_documents(text, "\n\n");
    CATCH_REQUIRE(f.num_documents() == static_cast<int64_t>(docs.size()));
    CATCH_CHECK(tok->decode(f.document(f.num_documents() - 1)) == docs.back());
    CATCH_CHECK(f.document_bytes(f.num_documents() - 1) == static_cast<int64_t>(docs.back().size()));
  }
}

CATCH_TEST_CASE("version 1 token files still open, their byte counts derived", "[contract][tokenizer]") {
  TokDir dir("v1");
  // A version 1 file, as earlier builds wrote it: header, ids, padding, offsets; no byte counts.
  const std::vector<uint16_t> ids = {256, 'h', 'i', 257, 256, 'y', 'o', 'u', 257};
  std::string bytes(128, '\0');
  std::memcpy(bytes.data(), "CAUSLTOK", 8);
  auto put32 = [&](size_t at, uint32_t v) { std::memcpy(bytes.data() + at, &v, 4); };
  auto put64 = [&](size_t at, uint64_t v) { std::memcpy(bytes.data() + at, &v, 8); };
  put32(8, 1);
  put32(12, 2);
  put64(16, 259);
  put64(24, ids.size());
  put64(32, 2);
  put64(40, 256);
  put64(48, 257);
  put64(56, 258);
  std::memcpy(bytes.data() + 64, "bytes", 5);
  bytes.append(reinterpret_cast<const char*>(ids.data()), 2 * ids.size());
  bytes.append(6, '\0');  // 128 + 18 = 146 -> 152
  const uint64_t starts[2] = {0, 4};
  bytes.append(reinterpret_cast<const char*>(starts), sizeof(starts));
  put_file(dir.file("old.tok"), bytes);
  const TokenFile f(dir.file("old.tok"));
  CATCH_CHECK(f.header().version == 1);
  CATCH_CHECK(f.tokenizer() == ByteTokenizer().info());
  CATCH_CHECK(f.document_bytes(0) == 2);
  CATCH_CHECK(f.document_bytes(1) == 3);
  CATCH_CHECK(read_token_file_header(dir.file("old.tok")).token_count == 9);
}

namespace {

// Readers written here from the formats' descriptions, independent of src/data/token_import.cpp.
std::vector<uint32_t> read_nanogpt(const std::string& bytes) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2)
    ids.push_back(static_cast<unsigned char>(bytes[i]) | (static_cast<unsigned char>(bytes[i + 1]) << 8));
  return ids;
}

std::string nanogpt_bytes(const std::vector<uint16_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), 2 * ids.size());
}

std::string llmc_bytes(const std::vector<uint16_t>& ids) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = static_cast<int32_t>(ids.size());
  return std::string(reinterpret_cast<const char*>(header.data()), 1024) + nanogpt_bytes(ids);
}

// Documents: maximal runs between EOTs.
std::vector<std::vector<int64_t>> split_at(const std::vector<uint32_t>& ids, uint32_t eot) {
  std::vector<std::vector<int64_t>> docs;
  std::vector<int64_t> cur;
  for (uint32_t id : ids) {
    if (id == eot) {
      if (!cur.empty()) docs.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(id);
    }
  }
  if (!cur.empty()) docs.push_back(cur);
  return docs;
}

}  // namespace

CATCH_TEST_CASE("nanoGPT and llm.c imports equal a reader written here", "[contract][import]") {
  TokDir dir("import");
  std::mt19937 rng(5);
  const uint16_t eot = 999;
  std::vector<uint16_t> ids = {eot};
  for (int i = 0; i < 3000; ++i) ids.push_back(rng() % 40 == 0 ? eot : static_cast<uint16_t>(rng() % 999));
  ids.push_back(eot);
  ids.push_back(eot);
  ids.push_back(17);  // a last document without a closing EOT
  put_file(dir.file("nano.bin"), nanogpt_bytes(ids));
  put_file(dir.file("llmc.bin"), llmc_bytes(ids));
  const std::vector<uint32_t> expected_ids = read_nanogpt(nanogpt_bytes(ids));
  const auto expected = split_at(expected_ids, eot);
  CATCH_REQUIRE(expected.size() > 20);
  for (const auto& [format, input] : {std::pair{ImportFormat::kNanoGpt, dir.file("nano.bin")},
                                      std::pair{ImportFormat::kLlmc, dir.file("llmc.bin")}}) {
    ImportOptions o;
    o.format = format;
    o.input = input;
    o.vocab = 1000;
    o.eot = eot;
    o.out = dir.file("imported.tok");
    import_token_file(o);
    const TokenFile f(o.out);
    CATCH_CHECK(f.tokenizer().name == "imported");
    CATCH_CHECK(f.tokenizer().vocab_size == 1000);
    CATCH_CHECK(f.tokenizer().bos_id == eot);
    CATCH_CHECK(!f.header().document_bytes_known);
    CATCH_REQUIRE(f.num_documents() == static_cast<int64_t>(expected.size()));
    for (int64_t d = 0; d < f.num_documents(); ++d) {
      std::vector<int64_t> want = {eot};
      want.insert(want.end(), expected[d].begin(), expected[d].end());
      want.push_back(eot);
      CATCH_REQUIRE(f.document(d) == want);
    }
    // Without --eot: one document of every id, framed by the added id V.
    o.eot = -1;
    import_token_file(o);
    const TokenFile whole(o.out);
    CATCH_CHECK(whole.tokenizer().vocab_size == 1001);
    CATCH_REQUIRE(whole.num_documents() == 1);
    std::vector<int64_t> want = {1000};
    want.insert(want.end(), expected_ids.begin(), expected_ids.end());
    want.push_back(1000);
    CATCH_CHECK(whole.document(0) == want);
  }
}

CATCH_TEST_CASE("corrupt imports are refused naming the offset", "[contract][import]") {
  TokDir dir("import_bad");
  const std::vector<uint16_t> ids = {5, 6, 7, 8};
  auto refuse = [&](ImportFormat format, const std::string& bytes, int64_t vocab, const std::string& needle) {
    put_file(dir.file("bad.bin"), bytes);
    ImportOptions o;
    o.format = format;
    o.input = dir.file("bad.bin");
    o.vocab = vocab;
    o.out = dir.file("out.tok");
    try {
      import_token_file(o);
    } catch (const DataError& e) {
      const std::string what = e.what();
      return what.find(needle) != std::string::npos && what.find("bad.bin") != std::string::npos
                 ? std::string()
                 : what;
    }
    return std::string("no error");
  };
  // Guard: the good files import.
  CATCH_CHECK(refuse(ImportFormat::kNanoGpt, nanogpt_bytes(ids), 9, "") == "no error");
  CATCH_CHECK(refuse(ImportFormat::kLlmc, llmc_bytes(ids), 9, "") == "no error");
  CATCH_CHECK(fs::exists(dir.file("out.tok")));
  fs::remove(dir.file("out.tok"));

  CATCH_CHECK(refuse(ImportFormat::kNanoGpt, nanogpt_bytes(ids), 8, "id 8 at byte offset 6") == "");
  CATCH_CHECK(refuse(ImportFormat::kNanoGpt, nanogpt_bytes(ids).substr(0, 7), 9, "byte offset 6") == "");
  CATCH_CHECK(refuse(ImportFormat::kLlmc, llmc_bytes(ids), 8, "id 8 at byte offset 1030") == "");
  std::string magic = llmc_bytes(ids);
  magic[0] = 1;
  CATCH_CHECK(refuse(ImportFormat::kLlmc, magic, 9, "wrong magic") == "");
  CATCH_CHECK(refuse(ImportFormat::kLlmc, llmc_bytes(ids).substr(0, 1031), 9, "truncated or corrupt") == "");
  CATCH_CHECK(refuse(ImportFormat::kLlmc, llmc_bytes(ids).substr(0, 100), 9, "truncated header") == "");
  CATCH_CHECK(refuse(ImportFormat::kNanoGpt, "", 9, "empty") == "");
  // Nothing was written by any refused import.
  CATCH_CHECK(!fs::exists(dir.file("out.tok")));
}

CATCH_TEST_CASE("vocab auto resolves from data.train and --set takes array indices", "[unit][config]") {
  TokDir dir("auto");
  const std::vector<uint16_t> ids = {1, 2, 3, 999, 4, 5};
  put_file(dir.file("in.bin"), nanogpt_bytes(ids));
  ImportOptions o;
  o.input = dir.file("in.bin");
  o.vocab = 1000;
  o.eot = 999;
  o.out = dir.file("train.tok");
  import_token_file(o);
  const std::string config = R"({"model": {"inputs": [{"name": "token", "vocab": "auto"}],
    "output_vocab": "auto", "d_model": 32, "n_heads": 4},
    "data": {"kind": "text", "train": ")" +
                             o.out + R"(", "val": ")" + o.out + R"("}})";
  const RunConfig resolved = parse_config_text(config, "auto.json", {}, ConfigScope::kRun, train_vocab_size);
  CATCH_CHECK(resolved.model.inputs[0].vocab == 1000);
  CATCH_CHECK(resolved.model.output_vocab == 1000);
  // Only a loader that can read data.train resolves "auto"; the config layer alone refuses it.
  CATCH_CHECK_THROWS_WITH(parse_config_text(config, "auto.json"), Catch::Contains("not accepted here"));
  // Recorded as numbers in the resolved config.
  CATCH_CHECK(config_to_json(resolved)["model"]["output_vocab"] == 1000);
  // --set with "auto" and with a dotted index.
  const std::string fixed = R"({"model": {"d_model": 32, "n_heads": 4},
    "data": {"kind": "text", "train": ")" +
                            o.out + R"(", "val": ")" + o.out + R"("}})";
  const RunConfig set =
      parse_config_text(fixed, "fixed.json", {"model.inputs.0.vocab=auto", "model.output_vocab=auto"},
                        ConfigScope::kRun, train_vocab_size);
  CATCH_CHECK(set.model.inputs[0].vocab == 1000);
  CATCH_CHECK(set.model.output_vocab == 1000);
  RunConfig plain;
  apply_override(plain, "model.inputs.0.vocab=512");
  CATCH_CHECK(plain.model.inputs[0].vocab == 512);
  CATCH_CHECK_THROWS_AS(apply_override(plain, "model.inputs.3.vocab=5"), ConfigError);
  CATCH_CHECK_THROWS_AS(apply_override(plain, "model.d_model=auto"), ConfigError);
  // "auto" needs a text run's data.train.
  const std::string retrieval = R"({"model": {"output_vocab": "auto"}, "data": {"kind": "retrieval"}})";
  CATCH_CHECK_THROWS_WITH(parse_config_text(retrieval, "r.json", {}, ConfigScope::kRun, train_vocab_size),
                          Catch::Contains("auto"));
}
