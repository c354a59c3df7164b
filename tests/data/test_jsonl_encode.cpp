// JSONL into token files (docs/data.md, "JSONL inputs"): the text, prompt-completion and chat formats, gzip,
// the loss mask they write, bad lines (named by file, line and field, nothing written) and --skip-bad-lines.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "data/jsonl_documents.h"
#include "data/text_encode.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "support/scratch_dir.h"

using namespace causal;
namespace fs = std::filesystem;

namespace {

std::string write_file(const testing::ScratchDir& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir.path / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string write_gzip(const testing::ScratchDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path / name).string();
  gzFile out = gzopen(path.c_str(), "wb");
  CATCH_REQUIRE(out != nullptr);
  CATCH_REQUIRE(gzwrite(out, text.data(), static_cast<unsigned>(text.size())) ==
                static_cast<int>(text.size()));
  gzclose(out);
  return path;
}

// The text a document's supervised labels spell (bytes tokenizer), and the text of the rest.
struct Split {
  std::string supervised, unsupervised;
  bool eos = false;
};
Split split_document(const TokenFile& file, int64_t d) {
  Split split;
  const int64_t begin = file.document_start(d), n = file.document_length(d);
  for (int64_t i = begin + 1; i < begin + n - 1; ++i) {
    std::string& side = file.supervised(i) ? split.supervised : split.unsupervised;
    side += static_cast<char>(file.token(i));
  }
  split.eos = file.supervised(begin + n - 1);
  return split;
}

EncodeOptions jsonl_options(const std::vector<std::string>& inputs, const std::string& out,
                            JsonlFormat format) {
  EncodeOptions options;
  options.inputs = inputs;
  options.out = out;
  options.jsonl.format = format;
  return options;
}

}  // namespace

CATCH_TEST_CASE("jsonl: the text format gives one document per line, gzipped or not, as text files do",
                "[unit][text]") {
  const testing::ScratchDir dir("jsonl_text");
  const std::string lines =
      "{\"text\": \"first document\\nwith two lines\"}\n"
      "\n"
      "{\"body\": \"ignored field\", \"text\": \"second \\u00e9\"}\r\n"
      "{\"text\": \"   \"}\n"
      "{\"text\": \"third, no newline at the end\"}";
  const std::string plain = write_file(dir, "a.jsonl", lines);
  const std::string gz = write_gzip(dir, "a.jsonl.gz", lines);
  encode_text(jsonl_options({plain}, (dir.path / "plain.tok").string(), JsonlFormat::kText));
  const EncodeResult result =
      encode_text(jsonl_options({gz}, (dir.path / "gz.tok").string(), JsonlFormat::kText));
  CATCH_CHECK(result.summary.find("skipped 2 blank line(s) or empty document(s)") != std::string::npos);
  const TokenFile a((dir.path / "plain.tok").string()), b((dir.path / "gz.tok").string());
  CATCH_REQUIRE(a.num_documents() == 3);
  CATCH_CHECK_FALSE(a.header().loss_mask);
  ByteTokenizer bytes;
  CATCH_CHECK(bytes.decode(a.document(0)) == "first document\nwith two lines");
  CATCH_CHECK(bytes.decode(a.document(1)) == "second \xc3\xa9");
  CATCH_CHECK(bytes.decode(a.document(2)) == "third, no newline at the end");
  for (int64_t d = 0; d < 3; ++d) CATCH_CHECK(a.document(d) == b.document(d));
  CATCH_CHECK(a.document_bytes(1) == 9);  // "second " and a two-byte é

  // --field names another key.
  const std::string other = write_file(dir, "b.jsonl", "{\"content\": \"x y\"}\n");
  EncodeOptions options = jsonl_options({other}, (dir.path / "c.tok").string(), JsonlFormat::kText);
  options.jsonl.text = "content";
  encode_text(options);
  CATCH_CHECK(bytes.decode(TokenFile((dir.path / "c.tok").string()).document(0)) == "x y");
}

CATCH_TEST_CASE("jsonl: prompt-completion masks the prompt out and counts the completion and EOS",
                "[contract][text]") {
  const testing::ScratchDir dir("jsonl_pc");
  const std::string input = write_file(dir, "pc.jsonl",
                                       "{\"prompt\": \"Q: 2+2?\\nA: \", \"completion\": \"4\"}\n"
                                       "{\"question\": \"Name a colour. \", \"answer\": \"Blue.\"}\n");
  EncodeOptions options =
      jsonl_options({input}, (dir.path / "pc.tok").string(), JsonlFormat::kPromptCompletion);
  CATCH_REQUIRE_THROWS_WITH(encode_text(options), Catch::Contains("pc.jsonl:2: field 'prompt' missing") &&
                                                      Catch::Contains("nothing was written"));
  CATCH_CHECK_FALSE(fs::exists(options.out));
  options.skip_bad_lines = true;
  EncodeResult result = encode_text(options);
  CATCH_CHECK(result.bad_lines == 1);
  CATCH_CHECK(result.summary.find("skipped 1 bad line(s)") != std::string::npos);
  const TokenFile file(options.out);
  CATCH_REQUIRE(file.header().loss_mask);
  CATCH_REQUIRE(file.num_documents() == 1);
  const Split split = split_document(file, 0);
  CATCH_CHECK(split.unsupervised == "Q: 2+2?\nA: ");
  CATCH_CHECK(split.supervised == "4");
  CATCH_CHECK(split.eos);
  CATCH_CHECK(file.supervised_labels() == 2);
  CATCH_CHECK(file.document_bytes(0) == 1);  // bits per byte divides by the supervised text only
  CATCH_CHECK(inspect_token_file(options.out).find("supervised  2 of 13 labels (15.4%)") !=
              std::string::npos);

  options.skip_bad_lines = false;
  options.jsonl.prompt = "question";
  options.jsonl.completion = "answer";
  CATCH_REQUIRE_THROWS_WITH(encode_text(options), Catch::Contains("pc.jsonl:1: field 'question' missing"));
}

CATCH_TEST_CASE("jsonl: chat renders ChatML for the bytes tokenizer and supervises the assistant's turns",
                "[contract][text]") {
  const testing::ScratchDir dir("jsonl_chat");
  const std::string input = write_file(
      dir, "chat.jsonl",
      "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
      "\"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello.\"}, {\"role\": \"user\", \"content\": "
      "\"Bye\"}, "
      "{\"role\": \"assistant\", \"content\": \"Bye.\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": "
      "\"Yes?\"}, {\"role\": \"user\", \"content\": \"Nothing\"}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"nobody answers\"}]}\n");
  const EncodeResult result =
      encode_text(jsonl_options({input}, (dir.path / "chat.tok").string(), JsonlFormat::kChat));
  CATCH_CHECK(result.summary.find("chat template chatml") != std::string::npos);
  CATCH_CHECK(result.summary.find("skipped 1 conversation(s) with no assistant turn") != std::string::npos);
  const TokenFile file((dir.path / "chat.tok").string());
  CATCH_REQUIRE(file.num_documents() == 2);
  const Split first = split_document(file, 0);
  CATCH_CHECK(first.supervised == "Hello.<|im_end|>Bye.<|im_end|>");
  CATCH_CHECK(
      first.unsupervised ==
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
      "\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n\n");
  CATCH_CHECK(first.eos);
  // Ending on the user's turn: the assistant's answer counts, the EOS does not.
  const Split second = split_document(file, 1);
  CATCH_CHECK(second.supervised == "Yes?<|im_end|>");
  CATCH_CHECK_FALSE(second.eos);

  // --chat-template picks another family.
  EncodeOptions zephyr = jsonl_options({input}, (dir.path / "z.tok").string(), JsonlFormat::kChat);
  zephyr.chat_template = "zephyr";
  encode_text(zephyr);
  CATCH_CHECK(split_document(TokenFile(zephyr.out), 1).supervised == "Yes?</s>");
}

CATCH_TEST_CASE("jsonl: every kind of bad line is named by file, line and field, and nothing is written",
                "[contract][text]") {
  const testing::ScratchDir dir("jsonl_bad");
  struct Case {
    JsonlFormat format;
    std::string line;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {JsonlFormat::kText, "{\"text\": \"fine\"", "the line not valid JSON"},
      {JsonlFormat::kText, "[\"text\"]", "the line is a JSON array, expected an object"},
      {JsonlFormat::kText, "{\"txt\": \"x\"}", "field 'text' missing"},
      {JsonlFormat::kText, "{\"text\": 3}", "field 'text' is number, expected a string"},
      {JsonlFormat::kPromptCompletion, "{\"prompt\": \"a\", \"completion\": null}",
       "field 'completion' is null, expected a string"},
      {JsonlFormat::kChat, "{\"messages\": {}}", "field 'messages' expected a non-empty array"},
      {JsonlFormat::kChat, "{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}",
       "field 'messages[0].role' unknown role 'bot'"},
      {JsonlFormat::kChat, "{\"messages\": [{\"role\": \"user\"}]}", "field 'messages[0].content' missing"},
  };
  for (const Case& c : cases) {
    CATCH_CAPTURE(c.line);
    const std::string input = write_file(dir, "bad.jsonl",
                                         "{\"text\": \"ok\", \"prompt\": \"p\", \"completion\": "
                                         "\"c\", \"messages\": [{\"role\": \"user\", "
                                         "\"content\": \"u\"}, {\"role\": \"assistant\", "
                                         "\"content\": \"a\"}]}\n" +
                                             c.line + "\n");
    const EncodeOptions options = jsonl_options({input}, (dir.path / "out.tok").string(), c.format);
    try {
      encode_text(options);
      CATCH_FAIL("no error for " << c.line);
    } catch (const DataError& e) {
      CATCH_CHECK_THAT(e.what(), Catch::Contains("bad.jsonl:2: " + c.expected));
    }
    CATCH_CHECK_FALSE(fs::exists(options.out));
  }
  // Mixed inputs and options that do not apply are refused before anything is read.
  const std::string text = write_file(dir, "plain.txt", "text");
  const std::string jsonl = write_file(dir, "ok.jsonl", "{\"text\": \"ok\"}\n");
  CATCH_CHECK_THROWS_WITH(
      encode_text(jsonl_options({jsonl, text}, (dir.path / "o.tok").string(), JsonlFormat::kText)),
      Catch::Contains("mix JSONL"));
  CATCH_CHECK_THROWS_WITH(
      encode_text(jsonl_options({text}, (dir.path / "o.tok").string(), JsonlFormat::kChat)),
      Catch::Contains("--format chat reads JSONL inputs"));
}

CATCH_TEST_CASE("jsonl: the line reader reads long lines and files without a final newline, gzipped or not",
                "[unit][text]") {
  const testing::ScratchDir dir("jsonl_lines");
  const std::string longline(3 << 20, 'x');  // longer than a read block
  const std::string text = "a\r\n" + longline + "\n\nlast";
  for (const std::string& path : {write_file(dir, "l.txt", text), write_gzip(dir, "l.gz", text)}) {
    LineReader reader(path);
    std::vector<std::string> lines;
    for (std::string line; reader.next(line);) lines.push_back(line);
    CATCH_REQUIRE(lines.size() == 4);
    CATCH_CHECK(lines[0] == "a");
    CATCH_CHECK(lines[1] == longline);
    CATCH_CHECK(lines[2].empty());
    CATCH_CHECK(lines[3] == "last");
    CATCH_CHECK(reader.line_number() == 4);
  }
  CATCH_CHECK_THROWS_WITH(LineReader((dir.path / "missing.jsonl").string()),
                          Catch::Contains("missing.jsonl"));
}
