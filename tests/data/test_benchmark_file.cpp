// Benchmark files and their text: the two layouts, lm-eval-harness's string rules with Python's meanings
// (expected values printed by CPython 3.11 running lm-eval's hellaswag utils), the pair encoding and its
// window, and the bundled Brown benchmark's promise that it holds only held-out text.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "core/errors.h"
#include "data/benchmark_file.h"
#include "data/benchmark_text.h"
#include "data/choice_encoding.h"
#include "data/python_text.h"
#include "data/text_encode.h"
#include "data/token_file.h"
#include "support/cli.h"
#include "support/scratch_dir.h"

using namespace causal;
using causal::testing::ScratchDir;
namespace fs = std::filesystem;

namespace {

fs::path write(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string data_error(const fs::path& file) {
  try {
    read_benchmark(file.string());
  } catch (const DataError& e) {
    return e.what();
  }
  CATCH_FAIL("expected a DataError from " << file);
  return "";
}

// Ids of a made-up vocabulary in which "ab" is one token: encoding text with and without what follows it can
// differ at the boundary, which is what _encode_pair's split has to get right.
class MergingTokenizer : public Tokenizer {
 public:
  MergingTokenizer() {
    info_.name = "merging";
    info_.vocab_size = 300;
    info_.bos_id = 256;
    info_.eos_id = 257;
    info_.pad_id = 258;
  }
  const TokenizerInfo& info() const override { return info_; }
  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 2, "ab") == 0) {
        ids.push_back(kAb);
        ++i;
      } else {
        ids.push_back(static_cast<unsigned char>(text[i]));
      }
    }
    return ids;
  }
  std::string decode(const std::vector<int64_t>&) const override { return ""; }
  static constexpr int64_t kAb = 299;

 private:
  TokenizerInfo info_;
};

}  // namespace

CATCH_TEST_CASE("benchmark text: Python's whitespace, len() and lm-eval's hellaswag clean-up",
                "[unit][benchmark]") {
  // str.isspace(): U+00A0, U+2003, U+3000 and U+001F are spaces to Python, and so stripped; U+200B is not.
  CATCH_CHECK(python_strip("\u00a0\u2003text\u3000 \x1f") == "text");
  CATCH_CHECK(python_rstrip("end\u200b") == "end\u200b");
  CATCH_CHECK(python_rstrip("a b \t\n") == "a b");
  CATCH_CHECK(python_rstrip("   ").empty());
  CATCH_CHECK(code_points("caf\u00e9 na\u00efve") == 10);
  CATCH_CHECK(code_points("\u20ac") == 1);

  CATCH_CHECK(
      hellaswag_preprocess("  Removing ice from car: [header] Then, the man writes over the snow [title] "
                           "covering the window.  ") ==
      "Removing ice from car: Then, the man writes over the snow. covering the window.");
  // '.' does not cross a newline, so "[b\nc]" stays; one pass of "  " -> " " leaves a double space of three.
  CATCH_CHECK(hellaswag_preprocess("a [b\nc] d [e] f   g") == "a [b\nc] d f  g");
  CATCH_CHECK(hellaswag_preprocess("x [title]y [step] z") == "x. y z");
  CATCH_CHECK(hellaswag_preprocess("[unclosed bracket here") == "[unclosed bracket here");
  CATCH_CHECK(hellaswag_query("Roof shingle removal", "A man is sitting on a roof.", "he") ==
              "Roof shingle removal: A man is sitting on a roof. He");
  CATCH_CHECK(hellaswag_query("Baking cookies", "A woman adds eggs", "THEN SHE STIRS") ==
              "Baking cookies: A woman adds eggs Then she stirs");
}

CATCH_TEST_CASE("benchmark file: HellaSwag's and the generic layout, detected per line",
                "[unit][benchmark]") {
  ScratchDir dir("bench_layouts");
  const fs::path file = write(
      dir.path, "mixed.jsonl",
      R"({"activity_label": "Baking cookies", "ctx_a": "A woman adds eggs", "ctx_b": "then she", "ctx": "ignored",)"
      R"( "endings": ["stirs [title] the bowl.", "sings."], "label": "1"})"
      "\n\n"
      R"({"ctx": " A man [header] rows a boat. ", "endings": ["He rows.", "It sinks.", "x"], "label": 2})"
      "\n"
      R"({"context": "The sky is ", "choices": ["blue", " green "], "answer": 0, "id": "extra fields are ignored"})"
      "\n");
  const Benchmark b = read_benchmark(file.string());
  CATCH_CHECK(b.name == "mixed");
  CATCH_REQUIRE(b.items.size() == 3);
  CATCH_CHECK(b.items[0].context == "Baking cookies: A woman adds eggs Then she");
  CATCH_CHECK(b.items[0].choices == std::vector<std::string>{"stirs. the bowl.", "sings."});
  CATCH_CHECK(b.items[0].answer == 1);
  CATCH_CHECK(b.items[0].line == 1);
  CATCH_CHECK(b.items[1].context == "A man rows a boat.");
  CATCH_CHECK(b.items[1].answer == 2);
  CATCH_CHECK(b.items[1].line == 3);
  // The generic layout is taken verbatim: spaces stay where the file put them.
  CATCH_CHECK(b.items[2].context == "The sky is ");
  CATCH_CHECK(b.items[2].choices == std::vector<std::string>{"blue", " green "});
  CATCH_CHECK(benchmark_name("data/benchmarks/brown-next-sentence.jsonl") == "brown-next-sentence");
}

CATCH_TEST_CASE("benchmark file: a bad line names the file, the line and the field", "[unit][benchmark]") {
  ScratchDir dir("bench_errors");
  const std::string good = R"({"context": "c", "choices": ["a", "b"], "answer": 1})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", ":2: not JSON"},
      {"[1, 2]", ":2: expected a JSON object, got array"},
      {R"({"context": "c"})", ":2: neither HellaSwag's fields"},
      {R"({"context": "c", "choices": ["a"], "endings": ["a"], "answer": 0})", ":2: has both"},
      {R"({"context": 3, "choices": ["a", "b"], "answer": 0})", ":2: field 'context': expected a string"},
      {R"({"context": "c", "choices": ["a"], "answer": 0})",
       ":2: field 'choices': expected a list of at least 2"},
      {R"({"context": "c", "choices": ["a", 7], "answer": 0})",
       ":2: field 'choices': entry 1: expected a string"},
      {R"({"context": "c", "choices": ["a", ""], "answer": 0})", ":2: field 'choices': entry 1 is empty"},
      {R"({"context": "c", "choices": ["a", "b"]})", ":2: field 'answer': missing"},
      {R"({"context": "c", "choices": ["a", "b"], "answer": 2})", ":2: field 'answer': 2 is not a choice"},
      {R"({"context": "c", "choices": ["a", "b"], "answer": "1"})",
       ":2: field 'answer': expected an integer"},
      {R"({"ctx": "c", "endings": ["a", "b"], "label": "x1"})", ":2: field 'label': expected an integer"},
      {R"({"endings": ["a", "b"], "label": 0})", ":2: field 'ctx': missing"},
  };
  for (const auto& [line, expected] : cases) {
    CATCH_INFO(line);
    const fs::path file = write(dir.path, "bad.jsonl", good + "\n" + line + "\n");
    const std::string what = data_error(file);
    CATCH_CHECK(what.find("[benchmark] " + file.string() + expected) != std::string::npos);
  }
  CATCH_CHECK(data_error(write(dir.path, "empty.jsonl", "\n  \n")).find("holds no items") !=
              std::string::npos);
  CATCH_CHECK(data_error(dir.path / "absent.jsonl").find("cannot open") != std::string::npos);
}

CATCH_TEST_CASE("choice encoding: lm-eval's _encode_pair with BOS, and its left-cut window",
                "[unit][benchmark]") {
  const MergingTokenizer tok;
  const int64_t bos = 256, ab = MergingTokenizer::kAb;
  // The context's trailing spaces move to the continuation: " b" is scored, not "b" after "a ".
  ChoiceTokens t = encode_choice(tok, "x a  ", " b");
  CATCH_CHECK(t.context == std::vector<int64_t>{bos, 'x', ' ', 'a'});
  CATCH_CHECK(t.continuation == std::vector<int64_t>{' ', ' ', ' ', 'b'});
  // A token spanning the boundary: whole = [BOS, x, AB], context = [BOS, x, a]; the continuation is what is
  // left of the whole after as many ids as the context has, here nothing (the scorer refuses such a pair).
  t = encode_choice(tok, "xa", "b");
  CATCH_CHECK(t.context == std::vector<int64_t>{bos, 'x', 'a'});
  CATCH_CHECK(t.continuation.empty());
  t = encode_choice(tok, "x", "abc");
  CATCH_CHECK(t.continuation == std::vector<int64_t>{ab, 'c'});
  // An empty context is BOS alone, as lm-eval's prefix token.
  t = encode_choice(tok, "", " ab");
  CATCH_CHECK(t.context == std::vector<int64_t>{bos});
  CATCH_CHECK(t.continuation == std::vector<int64_t>{' ', ab});

  // Window: the last max_seq_len + 1 ids of the pair, less the last one.
  t = ChoiceTokens{{bos, 1, 2, 3}, {4, 5}};
  ChoiceWindow w = choice_window(t, 3);
  CATCH_CHECK(w.truncated);
  CATCH_CHECK(w.inputs == std::vector<int64_t>{2, 3, 4});
  w = choice_window(t, 5);
  CATCH_CHECK_FALSE(w.truncated);
  CATCH_CHECK(w.inputs == std::vector<int64_t>{bos, 1, 2, 3, 4});
  w = choice_window(t, 8);
  CATCH_CHECK_FALSE(w.truncated);
  CATCH_CHECK(w.inputs == std::vector<int64_t>{bos, 1, 2, 3, 4});
}

CATCH_TEST_CASE("bundled benchmark: every item is held-out Brown text, and the tool rebuilds the file",
                "[unit][benchmark]") {
  const fs::path root = CAUSAL_SOURCE_DIR;
  const fs::path bundled = root / "data/benchmarks/brown-next-sentence.jsonl";
  const Benchmark b = read_benchmark(bundled.string());
  CATCH_REQUIRE(b.items.size() >= 1000);
  CATCH_REQUIRE(b.items.size() % 4 == 0);
  // The paragraphs of each held-out text (files in name order, cut at blank lines), and all of the sample's
  // text, train and validation split alike.
  const auto paragraphs = [](const fs::path& file) {
    const std::string text = testing::slurp(file);
    std::vector<std::string> pieces;
    for (size_t at = 0; at <= text.size();) {
      const size_t end = std::min(text.find("\n\n", at), text.size());
      pieces.push_back(text.substr(at, end - at));
      at = end + 2;
    }
    return pieces;
  };
  std::map<std::string, std::vector<std::string>> heldout;
  for (const auto& entry : fs::directory_iterator(root / "data/brown-heldout"))
    heldout[entry.path().stem().string()] = paragraphs(entry.path());
  std::string sample;
  for (const auto& entry : fs::directory_iterator(root / "data/brown-sample"))
    sample += testing::slurp(entry.path());
  CATCH_REQUIRE(heldout.size() >= 20);
  for (const auto& [name, text] : heldout) {
    CATCH_INFO(name);
    CATCH_CHECK(!fs::exists(root / "data/brown-sample" / (name + ".txt")));
  }

  int64_t answers_in_text = 0, in_sample = 0, groups_whole = 0;
  for (size_t g = 0; g < b.items.size(); g += 4) {
    // A group: four consecutive items of four different texts with the same four choices, each choice the
    // answer of one of them, so a scorer that ignores the contexts is right on exactly one.
    std::vector<std::string> first = b.items[g].choices, answers, texts;
    std::sort(first.begin(), first.end());
    bool whole = true;
    for (size_t i = g; i < g + 4; ++i) {
      const BenchmarkItem& item = b.items[i];
      CATCH_INFO("line " << item.line);
      CATCH_REQUIRE(item.choices.size() == 4);
      std::vector<std::string> sorted = item.choices;
      std::sort(sorted.begin(), sorted.end());
      whole = whole && sorted == first;
      answers.push_back(item.choices[item.answer]);
      // The item's paragraph starts with its context followed by the answer, as the scorer joins them.
      const std::string truth = item.context + kChoiceDelimiter + item.choices[item.answer];
      std::string home;
      for (const auto& [name, text] : heldout)
        for (const std::string& paragraph : text)
          if (paragraph.rfind(truth, 0) == 0) home = name;
      answers_in_text += !home.empty();
      texts.push_back(home);
      in_sample += sample.find(item.context) != std::string::npos;
      for (const std::string& choice : item.choices) in_sample += sample.find(choice) != std::string::npos;
    }
    std::sort(answers.begin(), answers.end());
    std::sort(texts.begin(), texts.end());
    whole = whole && answers == first && std::unique(texts.begin(), texts.end()) == texts.end();
    groups_whole += whole;
  }
  CATCH_CHECK(groups_whole == static_cast<int64_t>(b.items.size() / 4));
  CATCH_CHECK(answers_in_text == static_cast<int64_t>(b.items.size()));
  CATCH_CHECK(in_sample == 0);

  // Deterministic: the tool writes the bundled file again, byte for byte.
  ScratchDir dir("bench_bundled");
  const testing::Result r = testing::run_command(
      root.string(), "python3 tools/make-brown-benchmark --out " + (dir.path / "again.jsonl").string());
  if (r.code == 127) {
    std::cout << "SKIPPED: python3 is not installed, so tools/make-brown-benchmark cannot run\n";
    return;
  }
  CATCH_INFO(r.err);
  CATCH_REQUIRE(r.code == 0);
  CATCH_CHECK(testing::slurp(dir.path / "again.jsonl") == testing::slurp(bundled));
}
