// The GGUF container on its own: what is written reads back the same, and bad files are refused by name.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "io/gguf_file.h"
#include "support/scratch_dir.h"

using namespace causal;
using causal::testing::ScratchDir;

namespace {

GgufFile sample() {
  GgufFile f;
  f.metadata = {{"general.architecture", GgufValue::string("llama")},
                {"llama.block_count", GgufValue::u32(3)},
                {"llama.rope.freq_base", GgufValue::f32(500000.0f)},
                {"tokenizer.ggml.add_bos_token", GgufValue::boolean(true)},
                {"tokenizer.ggml.tokens", GgufValue::strings({"<s>", "a",
                                                              "\xe2\x96\x81"
                                                              "b",
                                                              ""})},
                {"tokenizer.ggml.scores", GgufValue::f32s({0.0, -1.5, -2.25, 3.0})},
                {"tokenizer.ggml.token_type", GgufValue::i32s({3, 1, 1, 6})},
                {"tokenizer.ggml.merges", GgufValue::strings({})}};
  // Odd sizes, so the 32-byte alignment padding between tensors is exercised.
  f.tensors.push_back({"a.weight", {3, 5}, GgufTensorType::kF32, std::string(60, '\x01')});
  f.tensors.push_back({"b.weight", {7}, GgufTensorType::kF16, std::string(14, '\x02')});
  f.tensors.push_back({"c.weight", {2, 3}, GgufTensorType::kBf16, std::string(12, '\x03')});
  return f;
}

}  // namespace

CATCH_TEST_CASE("gguf: a file reads back to the same metadata and tensors", "[unit][interop]") {
  ScratchDir dir("gguf_roundtrip");
  const std::string path = (dir.path / "m.gguf").string();
  const GgufFile written = sample();
  write_gguf(path, written);
  const GgufFile read = read_gguf(path);
  CATCH_REQUIRE(read.metadata.size() == written.metadata.size());
  for (size_t i = 0; i < written.metadata.size(); ++i) {
    CATCH_CHECK(read.metadata[i].first == written.metadata[i].first);
    CATCH_CHECK(read.metadata[i].second == written.metadata[i].second);
  }
  CATCH_REQUIRE(read.tensors.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CATCH_CHECK(read.tensors[i].name == written.tensors[i].name);
    CATCH_CHECK(read.tensors[i].shape == written.tensors[i].shape);
    CATCH_CHECK(read.tensors[i].type == written.tensors[i].type);
    CATCH_CHECK(read.tensors[i].data == written.tensors[i].data);
  }
  // Header layout as llama.cpp reads it: magic, version 3, tensor count, key count.
  std::ifstream in(path, std::ios::binary);
  char head[24];
  in.read(head, 24);
  CATCH_CHECK(std::string(head, 4) == "GGUF");
  CATCH_CHECK(head[4] == 3);
  CATCH_CHECK(head[8] == 3);
  CATCH_CHECK(head[16] == 8);
  // Every tensor's data starts on a multiple of the alignment: the file ends on one too.
  CATCH_CHECK(std::filesystem::file_size(path) % 32 == 0);
}

CATCH_TEST_CASE("gguf: undecodable tensors, other versions and truncated files are refused",
                "[unit][interop]") {
  ScratchDir dir("gguf_refusals");
  const std::string path = (dir.path / "m.gguf").string();
  write_gguf(path, sample());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto refused_with = [&](const std::string& content, const std::string& words) {
    const std::string bad = (dir.path / "bad.gguf").string();
    std::ofstream(bad, std::ios::binary) << content;
    try {
      read_gguf(bad);
    } catch (const DataError& e) {
      CATCH_CHECK(std::string(e.what()).find(words) != std::string::npos);
      CATCH_CHECK(std::string(e.what()).find(bad) != std::string::npos);
      return;
    }
    CATCH_FAIL("read_gguf accepted a bad file; expected: " << words);
  };
  // Tensor a.weight's type field: IQ2_XXS (16, a type causal does not decode) instead of F32, then Q4_0,
  // which causal reads, but not in rows of 5 (tests/io/test_gguf_quants.cpp has the quantized cases).
  std::string quantized = bytes;
  const size_t at = quantized.find("a.weight") + 8 + 4 + 16;
  CATCH_REQUIRE(quantized[at] == 0);
  quantized[at] = 16;
  refused_with(quantized, "tensor a.weight is IQ2_XXS");
  quantized[at] = 2;
  refused_with(quantized, "tensor a.weight is Q4_0 with rows of 5 elements");
  std::string version = bytes;
  version[4] = 2;
  refused_with(version, "GGUF version 2, expected 3");
  refused_with(bytes.substr(0, bytes.size() - 40), "runs past the end");
  refused_with("GGML" + bytes.substr(4), "not a GGUF file");
  // tests/fuzz/fuzz_gguf: an empty tensor was read, but written back it shared its offset with the next
  // one, and the copy was refused as overlapping (corpus/gguf/crash-empty-tensor-written-back-overlaps).
  std::string empty = bytes;
  const size_t dim = empty.find("b.weight") + 8 + 4;  // b.weight's one dimension, 7
  CATCH_REQUIRE(empty[dim] == 7);
  empty[dim] = 0;
  refused_with(empty, "tensor b.weight has an empty dimension");
}
