// Byte-level BPE against the real tokenizers (label interop, not in the default suite): the same ids as
// llama.cpp (llama-cpp-python, vocab_only) on the SmolLM2 GGUF and on GGUFs of small trained vocabularies,
// and as HF `tokenizers` on tokenizer.json files (transformers' conversion of the GGUF, causal's own export,
// BPEs trained with the GPT-2, Llama 3, Qwen2 and SmolLM pre-tokenizers), on the tokenizer corpus and the
// Brown sample; decode(encode(x)) == x and split_point on the same texts.
// tests/interop/tokenizer_reference.py is the Python side; without its packages the test prints SKIPPED.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/byte_bpe_model.h"
#include "data/byte_bpe_tokenizer.h"
#include "data/pre_tokenizer.h"
#include "data/tokenizer.h"
#include "support/promised_cut.h"
#include "support/scratch_dir.h"
#include "support/skip.h"

using namespace causal;

namespace interop_tokenizers_test {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string tokens_text(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += std::to_string(id) + " ";
  return out;
}

// The text with the BOS/EOS/PAD token texts removed: what decode gives back (those decode to nothing).
std::string without_document_specials(std::string text, const ByteBpeTokenizer& t) {
  for (int64_t id : {t.info().bos_id, t.info().eos_id, t.info().pad_id}) {
    const std::string& special = t.model().tokens[static_cast<size_t>(id)];
    const int32_t type = t.model().token_types[static_cast<size_t>(id)];
    if (special.empty() || (type != kTokenControl && type != kTokenUserDefined)) continue;
    for (size_t at; (at = text.find(special)) != std::string::npos;) text.erase(at, special.size());
  }
  return text;
}

}  // namespace interop_tokenizers_test

using namespace interop_tokenizers_test;
using testing::promised_cut;

CATCH_TEST_CASE("interop: byte-level BPE gives llama.cpp's and HF tokenizers' ids",
                "[.][interop-tokenizers]") {
  testing::ScratchDir dir("interop_tokenizers");
  const std::filesystem::path source = CAUSAL_SOURCE_DIR;
  // Texts: every corpus line, the whole corpus, every Brown file whole.
  std::vector<std::string> texts;
  const std::string corpus = read_file(source / "tests/data/tokenizer_corpus.txt");
  CATCH_REQUIRE(!corpus.empty());
  for (size_t start = 0; start < corpus.size();) {
    const size_t end = std::min(corpus.find('\n', start), corpus.size());
    texts.push_back(corpus.substr(start, end - start));
    start = end + 1;
  }
  texts.push_back(corpus);
  // Control bytes, some of which SmolLM2's vocabulary has no token for (sources differ on those).
  texts.push_back(
      std::string("control bytes: a\x01"
                  "b\x04\x04"
                  "c d\x7f e\x1b[0m \x00end\x04",
                  36));
  std::vector<std::filesystem::path> brown;
  for (const auto& entry : std::filesystem::directory_iterator(source / "data/brown-sample"))
    if (entry.path().extension() == ".txt") brown.push_back(entry.path());
  std::sort(brown.begin(), brown.end());
  for (const auto& path : brown) texts.push_back(read_file(path));
  std::ofstream(dir.path / "texts.json") << nlohmann::json(texts).dump();

  // causal's HF export of the GGUF, for HF tokenizers to encode with.
  const char* gguf_env = std::getenv("CAUSAL_SMOLLM2_GGUF");
  const std::string gguf = gguf_env != nullptr && std::filesystem::is_regular_file(gguf_env) ? gguf_env : "";
  if (!gguf.empty()) {
    const auto smollm = load_byte_bpe(gguf);
    std::filesystem::create_directories(dir.path / "export");
    std::ofstream(dir.path / "export/tokenizer.json") << hf_tokenizer_json(smollm->model());
    std::ofstream(dir.path / "export/tokenizer_config.json") << hf_tokenizer_config_json(smollm->model());
  }
  const std::filesystem::path log = dir.path / "reference.log";
  const std::string command =
      "cd " + source.string() + " && tests/interop/python.sh tests/interop/tokenizer_reference.py --texts " +
      (dir.path / "texts.json").string() + " --brown data/brown-sample --work " + dir.path.string() +
      " --out " + (dir.path / "result.json").string() + (gguf.empty() ? "" : " --gguf " + gguf) +
      " --export " + (dir.path / "export").string() + " >" + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 2) CAUSAL_SKIP_TEST("HF tokenizers is missing: " << read_file(log));
  CATCH_INFO(read_file(log));
  CATCH_REQUIRE(code == 0);
  const nlohmann::json result = nlohmann::json::parse(read_file(dir.path / "result.json"));
  for (const auto& why : result["skipped"]) std::cout << "not compared: " << why.get<std::string>() << "\n";
  CATCH_REQUIRE(result["cases"].size() >= 4);  // the trained BPEs need only HF tokenizers

  for (const auto& c : result["cases"]) {
    const std::string name = c["name"].get<std::string>();
    CATCH_INFO("case " << name);
    const auto tokenizer = make_tokenizer(c["tokenizer"].get<std::string>());
    const auto& bpe = dynamic_cast<const ByteBpeTokenizer&>(*tokenizer);
    const auto& ids = c["ids"];
    CATCH_REQUIRE(ids.size() == texts.size());
    int64_t tokens = 0, mismatches = 0, round_trip_failures = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int64_t> expected = ids[i].get<std::vector<int64_t>>();
      const std::vector<int64_t> got = bpe.encode(texts[i]);
      tokens += static_cast<int64_t>(expected.size());
      if (got != expected) {
        ++mismatches;
        if (mismatches <= 3)
          std::cout << name << ": text " << i << " differs\n  text: " << texts[i].substr(0, 200)
                    << "\n  reference: " << tokens_text(expected).substr(0, 400)
                    << "\n  causal:    " << tokens_text(got).substr(0, 400) << "\n";
      }
      // Bytes without a token cannot come back; every other text must.
      bool every_byte = true;
      for (char ch : texts[i])
        every_byte = every_byte && bpe.token_id(gpt2_byte_char(static_cast<uint8_t>(ch)));
      if (every_byte && bpe.decode(got) != without_document_specials(texts[i], bpe)) ++round_trip_failures;
    }
    std::cout << name << " (" << c["tokenizer"].get<std::string>() << ", pre " << bpe.model().pre_tokenizer
              << "): " << texts.size() << " texts, " << tokens << " tokens compared, " << mismatches
              << " texts differ, " << round_trip_failures << " round-trip failures\n";
    CATCH_CHECK(mismatches == 0);
    CATCH_CHECK(round_trip_failures == 0);
    // split_point on the Brown files: the two sides give the ids of the whole.
    int64_t cuts = 0, cut_failures = 0;
    const NamedPreTokenizer* pre = find_named_pre_tokenizer(bpe.model().pre_tokenizer);
    const SplitRule rule =
        pre != nullptr && !bpe.model().add_prefix_space ? pre->split_rule : SplitRule::kNone;
    const bool named = rule != SplitRule::kNone;
    for (size_t i = texts.size() - brown.size(); named && i < texts.size(); ++i) {
      const std::string& text = texts[i];
      const std::vector<int64_t> whole = bpe.encode(text);
      for (size_t length = 1000; length < text.size(); length += 4093) {
        const size_t p = bpe.split_point(std::string_view(text).substr(0, length));
        if (!promised_cut(rule, text, p)) continue;  // a fallback cut promises nothing
        ++cuts;
        std::vector<int64_t> parts = bpe.encode(std::string_view(text).substr(0, p));
        const std::vector<int64_t> right = bpe.encode(std::string_view(text).substr(p));
        parts.insert(parts.end(), right.begin(), right.end());
        if (parts != whole) ++cut_failures;
      }
    }
    std::cout << "  split_point: " << cuts << " cuts, " << cut_failures << " differ\n";
    CATCH_CHECK(cut_failures == 0);
  }
}
