// Tokenizer -> Vocab: a minimal protobuf reader for SentencePiece's ModelProto, and the byte alphabet.
#include "interop/vocab.h"

#include <cstring>
#include <map>

#include "core/errors.h"
#include "data/byte_bpe_model.h"
#include "data/byte_bpe_tokenizer.h"
#include "data/pre_tokenizer.h"

namespace causal {
namespace {

// Just enough of the protobuf wire format to walk a ModelProto: varints, fixed32 and length-delimited
// fields; anything else is skipped by its wire type.
class ProtoReader {
 public:
  ProtoReader(const std::string& bytes, size_t begin, size_t end) : bytes_(bytes), at_(begin), end_(end) {}
  bool done() const { return at_ >= end_; }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= end_) fail();
      const uint8_t b = static_cast<uint8_t>(bytes_[at_++]);
      value |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return value;
    }
    fail();
  }
  // Reads a tag; `field` and `wire` get its parts.
  void tag(uint32_t& field, uint32_t& wire) {
    const uint64_t t = varint();
    field = static_cast<uint32_t>(t >> 3);
    wire = static_cast<uint32_t>(t & 7);
  }
  float fixed32() {
    if (at_ + 4 > end_) fail();
    float f;
    std::memcpy(&f, bytes_.data() + at_, 4);
    at_ += 4;
    return f;
  }
  // The [begin, end) range of a length-delimited field.
  std::pair<size_t, size_t> span() {
    const uint64_t n = varint();
    if (n > end_ - at_) fail();
    const size_t begin = at_;
    at_ += n;
    return {begin, at_};
  }
  void skip(uint32_t wire) {
    if (wire == 0) {
      varint();
    } else if (wire == 1) {
      at_ += 8;
    } else if (wire == 2) {
      span();
    } else if (wire == 5) {
      at_ += 4;
    } else {
      fail();
    }
    if (at_ > end_) fail();
  }
  [[noreturn]] void fail() const {
    throw DataError("[tokenizer] the SentencePiece model is not a valid ModelProto (byte " +
                    std::to_string(at_) + ")");
  }

 private:
  const std::string& bytes_;
  size_t at_;
  size_t end_;
};

Vocab byte_bpe_vocab(const ByteBpeModel& model) {
  Vocab vocab;
  vocab.kind = Vocab::Kind::kByteBpe;
  vocab.pieces = model.tokens;
  vocab.scores.assign(model.tokens.size(), 0.0f);
  for (int32_t type : model.token_types) vocab.kinds.push_back(static_cast<PieceKind>(type));
  for (const auto& [left, right] : model.merges) vocab.merges.push_back(left + " " + right);
  vocab.bos_id = model.bos_id;
  vocab.eos_id = model.eos_id;
  vocab.pad_id = model.pad_id;
  vocab.unk_id = model.unk_id;
  vocab.pre_tokenizer =
      model.pre_tokenizer == "custom" ? pre_tokenizer_name(model.pre_regexes) : model.pre_tokenizer;
  vocab.add_bos = model.add_bos;
  vocab.chat_template = model.chat_template;
  return vocab;
}

}  // namespace

Vocab parse_sentencepiece(const std::string& bytes) {
  Vocab vocab;
  vocab.kind = Vocab::Kind::kSentencePieceUnigram;  // SentencePiece's default model type
  vocab.add_space_prefix = true;                    // NormalizerSpec defaults
  vocab.remove_extra_whitespaces = true;
  ProtoReader r(bytes, 0, bytes.size());
  while (!r.done()) {
    uint32_t field = 0, wire = 0;
    r.tag(field, wire);
    if (field == 1 && wire == 2) {  // SentencePiece {piece = 1, score = 2, type = 3}
      const auto [begin, end] = r.span();
      ProtoReader p(bytes, begin, end);
      std::string piece;
      float score = 0;
      int32_t type = 1;
      while (!p.done()) {
        uint32_t f = 0, w = 0;
        p.tag(f, w);
        if (f == 1 && w == 2) {
          const auto [b, e] = p.span();
          piece = bytes.substr(b, e - b);
        } else if (f == 2 && w == 5) {
          score = p.fixed32();
        } else if (f == 3 && w == 0) {
          type = static_cast<int32_t>(p.varint());
        } else {
          p.skip(w);
        }
      }
      vocab.pieces.push_back(piece);
      vocab.scores.push_back(score);
      vocab.kinds.push_back(static_cast<PieceKind>(type));
    } else if ((field == 2 || field == 3) && wire == 2) {  // TrainerSpec, NormalizerSpec
      const auto [begin, end] = r.span();
      ProtoReader s(bytes, begin, end);
      while (!s.done()) {
        uint32_t f = 0, w = 0;
        s.tag(f, w);
        if (field == 2 && f == 3 && w == 0) {  // model_type: UNIGRAM 1, BPE 2, WORD 3, CHAR 4
          const uint64_t type = s.varint();
          if (type == 2)
            vocab.kind = Vocab::Kind::kSentencePieceBpe;
          else if (type != 1)
            throw DataError("[tokenizer] SentencePiece model type " + std::to_string(type) +
                            " (word or char): only bpe and unigram models can be exported");
        } else if (field == 3 && f == 3 && w == 0) {
          vocab.add_space_prefix = s.varint() != 0;
        } else if (field == 3 && f == 4 && w == 0) {
          vocab.remove_extra_whitespaces = s.varint() != 0;
        } else {
          s.skip(w);
        }
      }
    } else {
      r.skip(wire);
    }
  }
  if (vocab.pieces.empty()) throw DataError("[tokenizer] the SentencePiece model lists no pieces");
  return vocab;
}

std::string byte_to_unicode(uint8_t byte) {
  // Printable Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) keeps its code point; the other 68 bytes
  // take U+0100 + n in byte order.
  auto printable = [](int b) { return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae); };
  int code = byte;
  if (!printable(byte)) {
    int n = 0;
    for (int b = 0; b < byte; ++b) n += printable(b) ? 0 : 1;
    code = 0x100 + n;
  }
  std::string utf8;
  if (code < 0x80) {
    utf8 += static_cast<char>(code);
  } else {
    utf8 += static_cast<char>(0xc0 | (code >> 6));
    utf8 += static_cast<char>(0x80 | (code & 0x3f));
  }
  return utf8;
}

int byte_from_unicode(const std::string& piece) {
  static const std::map<std::string, int> inverse = [] {
    std::map<std::string, int> m;
    for (int b = 0; b < 256; ++b) m[byte_to_unicode(static_cast<uint8_t>(b))] = b;
    return m;
  }();
  const auto it = inverse.find(piece);
  return it == inverse.end() ? -1 : it->second;
}

Vocab vocab_of(const TokenizerInfo& info, const std::string& model_bytes) {
  if (info.name == "bytes") {
    Vocab vocab;
    for (int b = 0; b < 256; ++b) {
      vocab.pieces.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
      vocab.scores.push_back(0.0f);
      vocab.kinds.push_back(PieceKind::kNormal);
    }
    for (const char* special : {"<s>", "</s>", "<pad>"}) {
      vocab.pieces.push_back(special);
      vocab.scores.push_back(0.0f);
      vocab.kinds.push_back(PieceKind::kControl);
    }
    vocab.bos_id = info.bos_id;
    vocab.eos_id = info.eos_id;
    vocab.pad_id = info.pad_id;
    return vocab;
  }
  if (model_bytes.empty())
    throw DataError("[tokenizer] " + info.describe() +
                    ": no tokenizer model to export (ids from another trainer); only bytes, SentencePiece "
                    "and byte-level BPE tokenizers can be written");
  if (info.name == kByteBpeTokenizer)
    return byte_bpe_vocab(parse_byte_bpe_model(model_bytes, "the run's tokenizer"));
  Vocab vocab = parse_sentencepiece(model_bytes);
  if (static_cast<int64_t>(vocab.pieces.size()) != info.vocab_size)
    throw DataError("[tokenizer] the SentencePiece model has " + std::to_string(vocab.pieces.size()) +
                    " pieces, the run's tokenizer " + std::to_string(info.vocab_size));
  vocab.bos_id = info.bos_id;
  vocab.eos_id = info.eos_id;
  vocab.pad_id = info.pad_id;
  for (size_t i = 0; i < vocab.kinds.size(); ++i)
    if (vocab.kinds[i] == PieceKind::kUnknown) vocab.unk_id = static_cast<int64_t>(i);
  return vocab;
}

}  // namespace causal
