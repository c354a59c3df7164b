// libcausal_sentencepiece.so: SentencePiece's processor and trainer behind SentencePieceBackend. Built as
// its own shared library and opened in a private scope (see data/sentencepiece_backend.h for why).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <exception>
#include <string>

#include "data/sentencepiece_backend.h"

namespace causal {
namespace {

class SentenceSource : public sentencepiece::SentenceIterator {
 public:
  explicit SentenceSource(const std::function<bool(std::string&)>& next) : next_(next) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !next_(value_); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::function<bool(std::string&)>& next_;
  std::string value_;
  bool done_ = false;
};

class Backend : public SentencePieceBackend {
 public:
  std::string load(const std::string& model) override {
    // SentencePiece reports most bad models by status, but its trie builder (darts-clone) throws, e.g. on
    // an empty piece (tests/fuzz/fuzz_sentencepiece.cpp feeds one): nothing may cross back as an exception.
    try {
      const auto status = processor_.LoadFromSerializedProto(model);
      return status.ok() ? "" : status.ToString();
    } catch (const std::exception& e) {
      // The caller refuses the model and discards this backend.
      return std::string("the model could not be loaded: ") + e.what();
    }
  }
  int piece_size() const override { return processor_.GetPieceSize(); }
  int bos_id() const override { return processor_.bos_id(); }
  int eos_id() const override { return processor_.eos_id(); }
  int pad_id() const override { return processor_.pad_id(); }
  std::string piece(int id) const override { return processor_.IdToPiece(id); }
  bool is_byte(int id) const override { return processor_.IsByte(id); }
  bool is_control(int id) const override { return processor_.IsControl(id); }
  bool is_unknown(int id) const override { return processor_.IsUnknown(id); }
  std::string encode(std::string_view text, std::vector<int>* ids) const override {
    const auto status = processor_.Encode(text, ids);
    return status.ok() ? "" : status.ToString();
  }
  std::string train(const std::unordered_map<std::string, std::string>& args,
                    const std::function<bool(std::string&)>& next, std::string* model) override {
    SentenceSource source(next);
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &source, model);
    return status.ok() ? "" : status.ToString();
  }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace
}  // namespace causal

extern "C" causal::SentencePieceBackend* causal_new_sentencepiece_backend() { return new causal::Backend(); }
