// Tokenizers as consumers list them: GPT-2's byte alphabet for the bytes tokenizer and SentencePiece's
// own model file read without the library.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "interop/vocab.h"

using namespace causal;

CATCH_TEST_CASE("vocab: the bytes tokenizer becomes GPT-2's byte-to-unicode alphabet", "[unit][interop]") {
  CATCH_CHECK(byte_to_unicode('A') == "A");
  CATCH_CHECK(byte_to_unicode(' ') == "\xc4\xa0");   // U+0120 'Ġ', as in GPT-2's vocab.json
  CATCH_CHECK(byte_to_unicode('\n') == "\xc4\x8a");  // U+010A 'Ċ'
  CATCH_CHECK(byte_to_unicode(0xad) == "\xc5\x83");  // U+0143: soft hyphen is not printable
  CATCH_CHECK(byte_to_unicode(0xff) == "\xc3\xbf");  // U+00FF 'ÿ' keeps its code point
  std::set<std::string> distinct;
  for (int b = 0; b < 256; ++b) {
    distinct.insert(byte_to_unicode(static_cast<uint8_t>(b)));
    CATCH_CHECK(byte_from_unicode(byte_to_unicode(static_cast<uint8_t>(b))) == b);
  }
  CATCH_CHECK(distinct.size() == 256);
  ByteTokenizer bytes;
  const Vocab v = vocab_of(bytes.info(), "");
  CATCH_REQUIRE(v.pieces.size() == 259);
  CATCH_CHECK(v.kind == Vocab::Kind::kBytes);
  CATCH_CHECK(v.pieces[256] == "<s>");
  CATCH_CHECK(v.kinds[257] == PieceKind::kControl);
  CATCH_CHECK(v.bos_id == 256);
  CATCH_CHECK(v.eos_id == 257);
}

CATCH_TEST_CASE("vocab: a SentencePiece BPE model's pieces, kinds and normalizer flags", "[unit][interop]") {
  const std::string path = std::string(CAUSAL_SOURCE_DIR) + "/data/brown-sample.bpe.model";
  if (!std::filesystem::exists(path)) {
    CATCH_WARN("SKIPPED: " << path << " not prepared (tools/test prepares it)");
    return;
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Vocab v = parse_sentencepiece(bytes);
  CATCH_REQUIRE(v.pieces.size() == 1024);
  CATCH_CHECK(v.kind == Vocab::Kind::kSentencePieceBpe);
  CATCH_CHECK(v.pieces[0] == "<s>");
  CATCH_CHECK(v.kinds[0] == PieceKind::kControl);
  CATCH_CHECK(v.kinds[3] == PieceKind::kUnknown);
  CATCH_CHECK(v.pieces[4] == "<0x00>");
  CATCH_CHECK(v.kinds[4] == PieceKind::kByte);
  CATCH_CHECK(v.kinds[300] == PieceKind::kNormal);
  // causal trains without a dummy prefix and keeps whitespace as it is (docs/data.md).
  CATCH_CHECK(!v.add_space_prefix);
  CATCH_CHECK(!v.remove_extra_whitespaces);
  CATCH_CHECK_THROWS(parse_sentencepiece(bytes.substr(0, 100)));
}
