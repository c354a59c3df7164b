// Byte-level BPE: merges by rank against a naive BPE written here, added tokens in text, byte round trips,
// the canonical model file, the files refused, and split_point against encoding the whole.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
#include "data/byte_bpe_model.h"
#include "data/byte_bpe_tokenizer.h"
#include "data/pre_tokenizer.h"
#include "data/text_encode.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "io/gguf_file.h"
#include "support/promised_cut.h"
#include "support/scratch_dir.h"

using namespace causal;

namespace byte_bpe_test {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_all(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The GPT-2 alphabet form of plain ASCII letters is the letter itself; these helpers build merges on
// arbitrary bytes through it.
std::string mapped(const std::string& bytes) {
  std::string out;
  for (char c : bytes) out += gpt2_byte_char(static_cast<uint8_t>(c));
  return out;
}

// The 256 byte tokens, `merges` (of raw byte strings) in rank order, then <|endoftext|> (EOS, control),
// <|im_start|> (control) and <x> and <x>y (user-defined, to see the longest match win).
ByteBpeModel tiny_model(const std::vector<std::pair<std::string, std::string>>& merges,
                        const std::string& pre = "gpt-2") {
  ByteBpeModel m;
  for (int b = 0; b < 256; ++b) m.tokens.push_back(gpt2_byte_char(static_cast<uint8_t>(b)));
  m.token_types.assign(256, kTokenNormal);
  for (const auto& [left, right] : merges) {
    m.merges.emplace_back(mapped(left), mapped(right));
    const std::string joined = mapped(left + right);
    if (std::find(m.tokens.begin(), m.tokens.end(), joined) == m.tokens.end()) {
      m.tokens.push_back(joined);
      m.token_types.push_back(kTokenNormal);
    }
  }
  for (const char* special : {"<|endoftext|>", "<|im_start|>"}) {
    m.tokens.push_back(special);
    m.token_types.push_back(kTokenControl);
  }
  for (const char* added : {"<x>", "<x>y"}) {
    m.tokens.push_back(added);
    m.token_types.push_back(kTokenUserDefined);
  }
  m.eos_id = static_cast<int64_t>(m.tokens.size()) - 4;
  m.pre_tokenizer = pre;
  m.pre_regexes = find_named_pre_tokenizer(pre)->regexes;
  m.ignore_merges = find_named_pre_tokenizer(pre)->ignore_merges;
  return m;
}

ByteBpeTokenizer make(const ByteBpeModel& m) {
  return ByteBpeTokenizer(byte_bpe_model_bytes(m), "test model");
}

int64_t id_of(const ByteBpeModel& m, const std::string& raw) {
  const auto it = std::find(m.tokens.begin(), m.tokens.end(), mapped(raw));
  if (it == m.tokens.end()) throw std::runtime_error("no token " + raw);
  return it - m.tokens.begin();
}

// BPE as the papers state it: merge the lowest-ranked adjacent pair, leftmost first, until none applies.
std::vector<int64_t> naive_bpe(const ByteBpeModel& m, const std::string& word) {
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t r = 0; r < m.merges.size(); ++r) rank.emplace(m.merges[r], r);
  std::vector<std::string> parts;
  for (char c : word) parts.push_back(gpt2_byte_char(static_cast<uint8_t>(c)));
  while (parts.size() > 1) {
    size_t best = parts.size();
    size_t best_rank = SIZE_MAX;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank.find({parts[i], parts[i + 1]});
      if (it != rank.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best == parts.size()) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<int64_t> ids;
  for (const std::string& p : parts)
    ids.push_back(std::find(m.tokens.begin(), m.tokens.end(), p) - m.tokens.begin());
  return ids;
}

std::string corpus() { return read_all(std::string(CAUSAL_SOURCE_DIR) + "/tests/data/tokenizer_corpus.txt"); }

std::string brown() {
  std::string text;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(CAUSAL_SOURCE_DIR) + "/data/brown-sample"))
    if (entry.path().extension() == ".txt") text += read_all(entry.path().string());
  return text;
}

template <class T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace byte_bpe_test

using namespace byte_bpe_test;
using testing::promised_cut;

CATCH_TEST_CASE("byte-bpe: merges apply by rank, leftmost among equals", "[unit][data]") {
  // The same three merges in two orders give two segmentations of "abc": rank order decides.
  const ByteBpeModel ab_first = tiny_model({{"a", "b"}, {"b", "c"}, {"ab", "c"}});
  const ByteBpeModel bc_first = tiny_model({{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  CATCH_CHECK(make(ab_first).encode("abc") == std::vector<int64_t>{id_of(ab_first, "abc")});
  CATCH_CHECK(make(bc_first).encode("abc") == (std::vector<int64_t>{'a', id_of(bc_first, "bc")}));
  const ByteBpeModel aa = tiny_model({{"a", "a"}});
  CATCH_CHECK(make(aa).encode("aaa") == (std::vector<int64_t>{id_of(aa, "aa"), 'a'}));
  // Words longer than the short-word scan go through the heap; both must agree with the naive BPE.
  const ByteBpeModel rich = tiny_model({{"a", "b"},
                                        {"b", "a"},
                                        {"ab", "a"},
                                        {"a", "a"},
                                        {"c", "c"},
                                        {"ab", "ab"},
                                        {"aa", "b"},
                                        {"cc", "c"},
                                        {"ba", "c"},
                                        {"abab", "ab"},
                                        {"ccc", "cc"}});
  const ByteBpeTokenizer t = make(rich);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string word(1 + rng() % 200, 'a');
    for (char& c : word) c = "abc"[rng() % 3];
    CATCH_CHECK(t.encode(word) == naive_bpe(rich, word));
  }
}

CATCH_TEST_CASE("byte-bpe: ignore_merges takes a word that is a token whole", "[unit][data]") {
  // "abc" is a token, but the merges alone make a + bc.
  ByteBpeModel m = tiny_model({{"b", "c"}, {"a", "b"}, {"ab", "c"}}, "llama-bpe");
  CATCH_CHECK(make(m).encode("abc") == std::vector<int64_t>{id_of(m, "abc")});
  m.ignore_merges = false;
  CATCH_CHECK(make(m).encode("abc") == (std::vector<int64_t>{'a', id_of(m, "bc")}));
}

CATCH_TEST_CASE("byte-bpe: bytes without a token are dropped, or become the unknown token as the source says",
                "[unit][data]") {
  ByteBpeModel m = tiny_model({{"a", "b"}});
  m.tokens[4] = "<unk>";  // byte 0x04 loses its token
  m.token_types[4] = kTokenUnknown;
  m.unk_id = 4;
  const std::string text =
      "ab\x04\x04"
      "ab \x04";
  const int64_t ab = id_of(m, "ab");
  CATCH_CHECK(make(m).encode(text) == (std::vector<int64_t>{ab, ab, ' '}));  // llama.cpp drops them
  m.unknown_bytes = "unk";
  CATCH_CHECK(make(m).encode(text) == (std::vector<int64_t>{ab, 4, 4, ab, ' ', 4}));
  m.unknown_bytes = "fused-unk";
  CATCH_CHECK(make(m).encode(text) == (std::vector<int64_t>{ab, 4, ab, ' ', 4}));
  m.unk_id = -1;
  CATCH_CHECK_THROWS_WITH(check_byte_bpe_model(m, "m"), Catch::Contains("no unknown token"));
}

CATCH_TEST_CASE("byte-bpe: added tokens written in text become those tokens, the longest first",
                "[unit][data]") {
  const ByteBpeModel m = tiny_model({});
  const ByteBpeTokenizer t = make(m);
  const int64_t eot = t.token_id("<|endoftext|>").value();
  const int64_t im_start = t.token_id("<|im_start|>").value();
  const int64_t x = t.token_id("<x>").value();
  const int64_t xy = t.token_id("<x>y").value();
  CATCH_CHECK(t.encode("q<x>yq<x>z") == (std::vector<int64_t>{'q', xy, 'q', x, 'z'}));
  CATCH_CHECK(t.encode("<|im_start|>a<|endoftext|>") == (std::vector<int64_t>{im_start, 'a', eot}));
  const std::vector<int64_t> partial = t.encode("<|im_start|");
  CATCH_CHECK(partial.size() > 1);
  CATCH_CHECK(std::find(partial.begin(), partial.end(), im_start) == partial.end());
  // EOS decodes to nothing (interface contract); other added tokens decode to their text.
  CATCH_CHECK(t.decode(t.encode("a<|endoftext|>b<|im_start|>c<x>y")) == "ab<|im_start|>c<x>y");
  CATCH_CHECK(t.info().eos_id == eot);
  CATCH_CHECK(t.info().bos_id == eot);  // no BOS: documents start with EOS
  CATCH_CHECK(t.info().pad_id == eot);
  CATCH_CHECK(!t.token_id("no such token").has_value());
}

CATCH_TEST_CASE("byte-bpe: decode(encode(x)) == x on varied text and arbitrary bytes", "[unit][data]") {
  const std::string text = corpus() + brown().substr(0, 50000);
  CATCH_REQUIRE(text.size() > 10000);
  std::mt19937 rng(3);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());  // mostly invalid UTF-8
  for (const NamedPreTokenizer& pre : named_pre_tokenizers()) {
    CATCH_INFO("pre-tokenizer " << pre.name);
    const ByteBpeTokenizer t =
        make(tiny_model({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"\n", "\n"}, {"1", "2"}}, pre.name));
    // The corpus writes <|im_start|> and <|endoftext|>: only the EOS text is lost (it decodes to nothing).
    std::string expected = text;
    for (size_t at; (at = expected.find("<|endoftext|>")) != std::string::npos;) expected.erase(at, 13);
    CATCH_CHECK(t.decode(t.encode(text)) == expected);
    CATCH_CHECK(t.decode(t.encode(noise)) == noise);
    CATCH_CHECK(t.encode("the").size() == 1);
  }
}

CATCH_TEST_CASE("byte-bpe: the canonical model file round-trips and identifies the tokenizer",
                "[unit][data]") {
  ByteBpeModel m = tiny_model({{"a", "b"}, {"ab", "c"}}, "qwen2");
  m.chat_template = "{{ messages }}";
  m.bos_id = 257;
  m.add_bos = true;
  const std::string bytes = byte_bpe_model_bytes(m);
  const ByteBpeModel back = parse_byte_bpe_model(bytes, "bytes");
  CATCH_CHECK(back == m);
  CATCH_CHECK(byte_bpe_model_bytes(back) == bytes);
  const ByteBpeTokenizer t(bytes, "bytes");
  CATCH_CHECK(t.info().name == kByteBpeTokenizer);
  CATCH_CHECK(t.info().vocab_size == static_cast<int64_t>(m.tokens.size()));
  CATCH_CHECK(t.info().bos_id == 257);
  CATCH_CHECK(t.info().model_sha256.size() == 64);
  // The recorded identity and bytes rebuild the same tokenizer; other bytes do not pass for it.
  const auto rebuilt = tokenizer_for(t.info(), t.model_bytes());
  CATCH_CHECK(rebuilt->encode("abc abc") == t.encode("abc abc"));
  ByteBpeModel other = m;
  other.merges.pop_back();
  CATCH_CHECK_THROWS_AS(tokenizer_for(t.info(), byte_bpe_model_bytes(other)), DataError);
}

CATCH_TEST_CASE("byte-bpe: GGUF metadata, HF tokenizer.json and our export load the same tokenizer",
                "[unit][data]") {
  testing::ScratchDir dir("byte_bpe_files");
  ByteBpeModel m = tiny_model({{"a", "b"}, {"ab", "c"}, {" ", "ab"}, {"1", "2"}}, "smollm");
  m.chat_template = "{% for m in messages %}{{ m }}{% endfor %}";
  const std::string text = corpus();
  const std::vector<int64_t> expected = make(m).encode(text);

  GgufFile gguf;
  std::vector<std::string> merges;
  for (const auto& [l, r] : m.merges) merges.push_back(l + " " + r);
  std::vector<int64_t> types(m.token_types.begin(), m.token_types.end());
  gguf.metadata = {{"general.architecture", GgufValue::string("llama")},
                   {"tokenizer.ggml.model", GgufValue::string("gpt2")},
                   {"tokenizer.ggml.pre", GgufValue::string("smollm")},
                   {"tokenizer.ggml.tokens", GgufValue::strings(m.tokens)},
                   {"tokenizer.ggml.token_type", GgufValue::i32s(types)},
                   {"tokenizer.ggml.merges", GgufValue::strings(merges)},
                   {"tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(m.eos_id))},
                   {"tokenizer.ggml.add_bos_token", GgufValue::boolean(false)},
                   {"tokenizer.chat_template", GgufValue::string(m.chat_template)}};
  const std::string gguf_path = (dir.path / "vocab.gguf").string();
  write_gguf(gguf_path, gguf);
  const auto from_gguf = make_tokenizer(gguf_path);
  CATCH_CHECK(from_gguf->info().name == kByteBpeTokenizer);
  CATCH_CHECK(from_gguf->encode(text) == expected);
  CATCH_CHECK(dynamic_cast<const ByteBpeTokenizer&>(*from_gguf).model() == m);

  const std::filesystem::path hf = dir.path / "hf";
  std::filesystem::create_directories(hf);
  write_all(hf / "tokenizer.json", hf_tokenizer_json(m));
  write_all(hf / "tokenizer_config.json", hf_tokenizer_config_json(m));
  const auto from_hf = make_tokenizer((hf / "tokenizer.json").string());
  CATCH_CHECK(from_hf->encode(text) == expected);
  CATCH_CHECK(from_hf->info().eos_id == m.eos_id);
  const ByteBpeModel& hf_model = dynamic_cast<const ByteBpeTokenizer&>(*from_hf).model();
  CATCH_CHECK(hf_model.pre_tokenizer == "smollm");
  CATCH_CHECK(hf_model.chat_template == m.chat_template);
  // A .json under another name is a tokenizer when its top level has "model".
  std::filesystem::copy_file(hf / "tokenizer.json", hf / "vocab.json");
  CATCH_CHECK(make_tokenizer((hf / "vocab.json").string())->encode(text) == expected);
}

CATCH_TEST_CASE("byte-bpe: files that are not supported byte-level BPE are refused naming the key",
                "[unit][data]") {
  testing::ScratchDir dir("byte_bpe_bad");
  const ByteBpeModel m = tiny_model({{"a", "b"}});
  auto gguf_error = [&](const std::string& model, const std::string& pre) {
    GgufFile f;
    f.metadata = {{"tokenizer.ggml.model", GgufValue::string(model)},
                  {"tokenizer.ggml.pre", GgufValue::string(pre)},
                  {"tokenizer.ggml.tokens", GgufValue::strings(m.tokens)},
                  {"tokenizer.ggml.merges", GgufValue::strings({mapped("a") + " " + mapped("b")})},
                  {"tokenizer.ggml.eos_token_id", GgufValue::u32(0)}};
    try {
      byte_bpe_from_gguf(f, "x.gguf");
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CATCH_CHECK(gguf_error("gpt2", "smollm") == "accepted");
  const std::string unknown_pre = gguf_error("gpt2", "tekken-9");
  CATCH_CHECK(unknown_pre.find("tekken-9") != std::string::npos);
  CATCH_CHECK(unknown_pre.find("llama-bpe") != std::string::npos);  // the known ones are listed
  CATCH_CHECK(gguf_error("llama", "default").find("tokenizer.ggml.model is 'llama'") != std::string::npos);

  ByteBpeModel bad_merge = m;
  bad_merge.merges.emplace_back(mapped("x"), mapped("y"));  // "xy" is no token
  CATCH_CHECK_THROWS_WITH(check_byte_bpe_model(bad_merge, "m"), Catch::Contains("'xy'"));
  ByteBpeModel no_eos = m;
  no_eos.eos_id = -1;
  CATCH_CHECK_THROWS_WITH(ByteBpeTokenizer(byte_bpe_model_bytes(no_eos), "m"), Catch::Contains("no EOS"));
  CATCH_CHECK_THROWS_WITH(parse_byte_bpe_model("{\"format\": \"causal byte-bpe 1\"}", "m.json"),
                          Catch::Contains("m.json"));
  ByteBpeModel bad_regex = m;
  bad_regex.pre_tokenizer = "custom";
  bad_regex.pre_regexes = {"(unclosed"};
  CATCH_CHECK_THROWS_WITH(ByteBpeTokenizer(byte_bpe_model_bytes(bad_regex), "m"),
                          Catch::Contains("(unclosed"));

  // tokenizer.json: each unsupported part is named.
  const nlohmann::json good = nlohmann::json::parse(hf_tokenizer_json(m));
  auto hf_error = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    write_all(dir.path / "tokenizer.json", j.dump());
    try {
      byte_bpe_from_hf((dir.path / "tokenizer.json").string());
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CATCH_CHECK(hf_error([](nlohmann::json&) {}) == "accepted");
  CATCH_CHECK(hf_error([](nlohmann::json& j) {
                j["normalizer"] = {{"type", "NFC"}};
              }).find("normalizer") != std::string::npos);
  CATCH_CHECK(hf_error([](nlohmann::json& j) { j["model"]["type"] = "Unigram"; }).find("model.type") !=
              std::string::npos);
  CATCH_CHECK(
      hf_error([](nlohmann::json& j) {
        j["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"Regex", "\\s"}}}, {"behavior", "Removed"}, {"invert", false}};
      }).find("behavior") != std::string::npos);
  CATCH_CHECK(hf_error([](nlohmann::json& j) {
                j["pre_tokenizer"] = {{"type", "Metaspace"}};
              }).find("pre_tokenizer.type") != std::string::npos);
  CATCH_CHECK(hf_error([](nlohmann::json& j) {
                j["decoder"] = {{"type", "WordPiece"}};
              }).find("decoder") != std::string::npos);
  CATCH_CHECK(hf_error([](nlohmann::json& j) { j["added_tokens"][0]["lstrip"] = true; }).find("lstrip") !=
              std::string::npos);
}

CATCH_TEST_CASE("byte-bpe: split_point cuts where both sides encode as the whole does", "[unit][data]") {
  const std::string text = corpus() + brown().substr(0, 60000);
  for (const NamedPreTokenizer& pre : named_pre_tokenizers()) {
    CATCH_INFO("pre-tokenizer " << pre.name);
    // Merges across line breaks and spaces, so that a cut in the wrong place changes the ids.
    const ByteBpeTokenizer t = make(tiny_model({{".", "\n"},
                                                {"\n", "\n"},
                                                {" ", "\n"},
                                                {"e", "\n"},
                                                {" ", " "},
                                                {"\n", "T"},
                                                {"t", "h"},
                                                {"th", "e"},
                                                {" ", "the"},
                                                {"1", "2"}},
                                               pre.name));
    const PreTokenizer splitter(pre.regexes, pre.name);
    const std::vector<int64_t> whole = t.encode(text);
    std::vector<std::string_view> whole_pieces;
    splitter.split(text, whole_pieces);
    int cuts = 0;
    for (size_t length = 300; length < text.size(); length += 997) {
      const size_t p = t.split_point(std::string_view(text).substr(0, length));
      CATCH_REQUIRE(p > 0);
      CATCH_REQUIRE(p <= length);
      if (!promised_cut(pre.split_rule, text, p)) continue;  // the fallback cut, which promises nothing
      ++cuts;
      const std::string_view left = std::string_view(text).substr(0, p);
      const std::string_view right = std::string_view(text).substr(p);
      CATCH_CHECK(concat(t.encode(left), t.encode(right)) == whole);
      std::vector<std::string_view> pieces;
      splitter.split(left, pieces);
      splitter.split(right, pieces);
      std::vector<std::string> a(pieces.begin(), pieces.end()), b(whole_pieces.begin(), whole_pieces.end());
      CATCH_CHECK(a == b);
    }
    CATCH_CHECK(cuts > 40);  // the rule finds its place in prose and in the Brown sample's paragraphs
  }
}

CATCH_TEST_CASE("byte-bpe: the named pre-tokenizers split as their tokenizers do", "[unit][data]") {
  auto split = [](const std::string& name, const std::string& text) {
    const PreTokenizer p(find_named_pre_tokenizer(name)->regexes, name);
    std::vector<std::string_view> pieces;
    p.split(text, pieces);
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  using V = std::vector<std::string>;
  CATCH_CHECK(split("gpt-2", "It's 2024  ok!\n") == V{"It", "'s", " 2024", " ", " ok", "!", "\n"});
  CATCH_CHECK(split("gpt-2", "HE'S") == V{"HE", "'", "S"});  // GPT-2's contractions are lowercase only
  CATCH_CHECK(split("llama-bpe", "HE'S 12345.\n\nx") == V{"HE", "'S", " ", "123", "45", ".\n\n", "x"});
  CATCH_CHECK(split("qwen2", "ab 123") == V{"ab", " ", "1", "2", "3"});
  CATCH_CHECK(split("smollm", "ab 123") == V{"ab", " ", "1", "2", "3"});
  CATCH_CHECK(split("gpt-2", "\xff\xfe abc") == V{"\xff\xfe", " abc"});  // invalid UTF-8 stays, unmatched
  CATCH_CHECK(pre_tokenizer_name(find_named_pre_tokenizer("qwen2")->regexes) == "qwen2");
  CATCH_CHECK(
      pre_tokenizer_name({R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"}) ==
      "gpt-2");  // llama.cpp's spelling
  CATCH_CHECK(pre_tokenizer_name({"\\s+"}).empty());
}

CATCH_TEST_CASE("byte-bpe: threads sharing one tokenizer (and its word cache) get the ids of one thread",
                "[unit][data]") {
  const std::string text = brown().substr(0, 80000);
  const ByteBpeModel m =
      tiny_model({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"e", "r"}, {" ", "a"}}, "llama-bpe");
  const std::vector<int64_t> expected = make(m).encode(text);
  const ByteBpeTokenizer shared = make(m);
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 3; ++rep) got[i] = shared.encode(text);
    });
  for (std::thread& t : threads) t.join();
  for (const auto& ids : got) CATCH_CHECK(ids == expected);
}

CATCH_TEST_CASE("byte-bpe: data encode cuts long documents at split_point and stores the ids of the whole",
                "[unit][data]") {
  // One long document encoded in many chunks on two threads (a small memory cap) must hold exactly the ids
  // of encoding it whole: split_point's promise, through the encoder that relies on it.
  testing::ScratchDir dir("byte_bpe_encode");
  std::string text;
  for (int i = 0; i < 4; ++i) text += brown();
  write_all(dir.path / "doc.txt", text);
  const ByteBpeModel m =
      tiny_model({{"t", "h"}, {"th", "e"}, {" ", "the"}, {"\n", "\n"}, {" ", "a"}}, "smollm");
  write_all(dir.path / "model.json", byte_bpe_model_bytes(m));
  EncodeOptions options;
  options.inputs = {(dir.path / "doc.txt").string()};
  options.tokenizer = (dir.path / "model.json").string();
  options.out = (dir.path / "doc.tok").string();
  options.memory_cap_bytes = int64_t{1} << 20;
  options.threads = 2;
  encode_text(options);
  const TokenFile file(options.out);
  CATCH_REQUIRE(file.num_documents() == 1);
  const std::vector<int64_t> stored = file.document(0);
  const ByteBpeTokenizer t = make(m);
  CATCH_CHECK(file.tokenizer() == t.info());
  CATCH_CHECK(std::vector<int64_t>(stored.begin() + 1, stored.end() - 1) == t.encode(text));
}
