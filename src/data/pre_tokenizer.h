// Pre-tokenization of byte-level BPE tokenizers: text cut into words by regexes run with PCRE2, and the
// table of the named pre-tokenizers llama.cpp knows (GGUF tokenizer.ggml.pre) with their regexes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace causal {

// Where text may be cut so that the pieces on both sides are those of the whole (ByteBpeTokenizer::
// split_point; docs/tokenizers.md argues each rule).
enum class SplitRule {
  kNone,             // no proven place
  kGpt2LineBreaks,   // GPT-2 family: after "\n" between a printable ASCII character and an ASCII letter,
                     // or between the last two of two or more "\n" before an ASCII letter
  kAfterLineBreaks,  // Llama 3 family: after the last "\n" of a run before an ASCII letter
};

// A pre-tokenizer llama.cpp names in GGUF files. The regexes are written as in the Hugging Face
// tokenizer.json of the models that use it; they run one after the other, each on the pieces of the last.
struct NamedPreTokenizer {
  std::string name;                  // the canonical GGUF name, e.g. "llama-bpe"
  std::vector<std::string> aliases;  // other GGUF names llama.cpp gives the same splitting
  std::vector<std::string> regexes;
  bool ignore_merges = false;  // a word that is a whole token is that token (llama.cpp and HF agree here)
  std::string splits;          // what it does, in words (docs and errors)
  SplitRule split_rule = SplitRule::kNone;
};

const std::vector<NamedPreTokenizer>& named_pre_tokenizers();
// The entry of a canonical name or alias; nullptr when unknown.
const NamedPreTokenizer* find_named_pre_tokenizer(const std::string& name);
// "default, gpt2, llama-bpe, ..." (canonical names and aliases), for error messages.
std::string known_pre_tokenizer_names();
// The canonical name whose regexes split like `regexes` (spellings llama.cpp adapted are recognized as the
// originals), or "" when none does: GGUF export writes it as tokenizer.ggml.pre.
std::string pre_tokenizer_name(const std::vector<std::string>& regexes);

// The GPT-2 regex (HF ByteLevel's use_regex): contractions, letters, digits, other symbols, whitespace.
extern const char* const kGpt2Regex;

// Regexes compiled once (PCRE2, UTF + UCP, JIT where the platform has it); split() is const and safe to call
// from many threads. Each regex cuts every piece into its matches and the text between them (HF's Split
// "Isolated" behaviour; llama.cpp's unicode_regex_split). Invalid UTF-8 never matches: it stays in the pieces
// between matches, so every byte of the text is in exactly one piece.
class PreTokenizer {
 public:
  // Throws DataError naming `where` and the regex when one does not compile.
  PreTokenizer(const std::vector<std::string>& regexes, const std::string& where);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of `text` to `pieces`, in order; they concatenate to `text`.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace causal
