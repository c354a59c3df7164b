// The SentencePiece library behind an interface, loaded at run time into a scope of its own.
//
// Why not link it: Debian's libsentencepiece carries its own copy of protobuf (3.14) and exports it, while
// LibTorch pulls in the system libprotobuf (3.21). Linked into one program, the two copies' symbols
// interpose and the process crashes before main. So libcausal_sentencepiece.so (src/data/sentencepiece_shim)
// links SentencePiece and is opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): its protobuf stays private,
// and only this interface's virtual calls cross over.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace causal {

class SentencePieceBackend {
 public:
  virtual ~SentencePieceBackend() = default;
  // Loads a serialized model (a .model file's bytes); returns "" or the library's error.
  virtual std::string load(const std::string& model) = 0;
  virtual int piece_size() const = 0;
  virtual int bos_id() const = 0;  // -1 when the model has none
  virtual int eos_id() const = 0;
  virtual int pad_id() const = 0;
  virtual std::string piece(int id) const = 0;
  virtual bool is_byte(int id) const = 0;
  virtual bool is_control(int id) const = 0;
  virtual bool is_unknown(int id) const = 0;
  // Ids of `text` into `ids` (replaced); returns "" or the error.
  virtual std::string encode(std::string_view text, std::vector<int>* ids) const = 0;
  // Trains with SentencePieceTrainer's `args`; `next` fills one sentence and returns false at the end.
  // Returns "" or the error; the serialized model goes to `model`.
  virtual std::string train(const std::unordered_map<std::string, std::string>& args,
                            const std::function<bool(std::string&)>& next, std::string* model) = 0;
};

// A backend from libcausal_sentencepiece.so (next to the running executable, else the build tree's).
// Throws DataError when the library cannot be loaded.
std::unique_ptr<SentencePieceBackend> make_sentencepiece_backend();

// Whether make_sentencepiece_backend can succeed: false in sanitizer builds (tests skip SentencePiece there).
bool sentencepiece_available();

}  // namespace causal

// The shim's one exported entry point.
extern "C" causal::SentencePieceBackend* causal_new_sentencepiece_backend();
