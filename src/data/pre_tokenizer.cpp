// Named pre-tokenizers and their PCRE2 regexes. The character classes (\p{L}, \p{N}, \s with UCP) come from
// PCRE2's own Unicode tables: no table is written here.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pre_tokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <new>

#include "core/errors.h"

namespace causal {

const char* const kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// As in Llama 3's and Qwen2's tokenizer.json; they differ only in how many digits make one piece.
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Spellings llama.cpp uses for the same splitting. Its GPT-2 regex lacks the final `|\s+`: the only text
// that alternative takes is one whitespace character before a non-space that no other alternative takes
// with it, which the Isolated split leaves as a piece of its own anyway. Its Llama 3 and Qwen2 regexes spell
// the case-insensitive contractions as character classes.
struct RegexAlias {
  const char* spelling;
  const char* original;
};
const RegexAlias kRegexAliases[] = {
    {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))", kGpt2Regex},
    {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     kLlama3Regex},
    {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     kQwen2Regex},
};

std::string original_spelling(const std::string& regex) {
  for (const RegexAlias& alias : kRegexAliases)
    if (regex == alias.spelling) return alias.original;
  return regex;
}

// One piece of scratch per thread: PCRE2 match data and a JIT stack larger than the 32 KiB default, so
// that long runs of one class never exhaust it.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(1, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (data == nullptr || context == nullptr) throw std::bad_alloc();
    if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);  // null without JIT support
  }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& match_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

const std::vector<NamedPreTokenizer>& named_pre_tokenizers() {
  static const std::vector<NamedPreTokenizer> table = {
      {"default",
       {},
       {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"},
       false,
       "punctuation runs, then GPT-2's words, digit runs, then ASCII digits in threes (llama.cpp's default)",
       SplitRule::kGpt2LineBreaks},
      {"gpt-2",
       {"gpt2", "phi-2", "mpt", "olmo", "jais"},
       {kGpt2Regex},
       false,
       "GPT-2: contractions, ' '? letters, ' '? digit runs, ' '? other symbols, whitespace",
       SplitRule::kGpt2LineBreaks},
      {"llama-bpe",
       {"llama3", "llama-v3"},
       {kLlama3Regex},
       true,
       "Llama 3: contractions in any case, one non-letter then letters, 1-3 digits, symbols with their line "
       "breaks, line breaks with the spaces before them, whitespace; a word that is a token stays whole",
       SplitRule::kAfterLineBreaks},
      {"smollm",
       {"starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2Regex},
       false,
       "every digit alone, then GPT-2's words (SmolLM, StarCoder)",
       SplitRule::kGpt2LineBreaks},
      {"qwen2",
       {"stablelm2", "hunyuan"},
       {kQwen2Regex},
       false,
       "Qwen2: as Llama 3 with every digit alone",
       SplitRule::kAfterLineBreaks},
  };
  return table;
}

const NamedPreTokenizer* find_named_pre_tokenizer(const std::string& name) {
  for (const NamedPreTokenizer& entry : named_pre_tokenizers()) {
    if (entry.name == name) return &entry;
    for (const std::string& alias : entry.aliases)
      if (alias == name) return &entry;
  }
  return nullptr;
}

std::string known_pre_tokenizer_names() {
  std::string names;
  for (const NamedPreTokenizer& entry : named_pre_tokenizers()) {
    names += (names.empty() ? "" : ", ") + entry.name;
    for (const std::string& alias : entry.aliases) names += ", " + alias;
  }
  return names;
}

std::string pre_tokenizer_name(const std::vector<std::string>& regexes) {
  std::vector<std::string> originals;
  for (const std::string& regex : regexes) originals.push_back(original_spelling(regex));
  for (const NamedPreTokenizer& entry : named_pre_tokenizers())
    if (entry.regexes == originals) return entry.name;
  return "";
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes, const std::string& where) {
  for (const std::string& regex : regexes) {
    auto compiled = std::make_unique<Compiled>();
    int error = 0;
    PCRE2_SIZE offset = 0;
    // MATCH_INVALID_UTF: text may hold any bytes; invalid sequences are never part of a match.
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (compiled->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      throw DataError("[tokenizer] " + where + ": pre-tokenizer regex '" + regex + "' does not compile (" +
                      reinterpret_cast<const char*>(message) + " at offset " + std::to_string(offset) + ")");
    }
    // Without JIT support (some platforms) the interpreter runs the same pattern, slower.
    compiled->jit = pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE) == 0;
    regexes_.push_back(std::move(compiled));
  }
}

PreTokenizer::~PreTokenizer() = default;

namespace {

// Cuts `text` into the matches of `code` and the runs between them, appended to `out`.
void split_isolated(const pcre2_code* code, bool jit, std::string_view text,
                    std::vector<std::string_view>& out) {
  MatchScratch& scratch = match_scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap = 0;  // start of the text not yet in a piece
  size_t at = 0;   // where the next search starts
  while (at < text.size()) {
    const int rc = jit ? pcre2_jit_match(code, subject, text.size(), at, 0, scratch.data, scratch.context)
                       : pcre2_match(code, subject, text.size(), at, 0, scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw DataError(std::string("[tokenizer] pre-tokenizer regex failed on the text (") +
                      reinterpret_cast<const char*>(message) + ")");
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (end == start) {
      // An empty match cuts nothing; the search goes on after the character there.
      if (start >= text.size()) break;
      at = std::min(text.size(), start + utf8_sequence_length(static_cast<unsigned char>(text[start])));
      continue;
    }
    if (start > gap) out.push_back(text.substr(gap, start - gap));
    out.push_back(text.substr(start, end - start));
    gap = at = end;
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  if (regexes_.empty()) {
    if (!text.empty()) pieces.push_back(text);
    return;
  }
  if (regexes_.size() == 1) return split_isolated(regexes_[0]->code, regexes_[0]->jit, text, pieces);
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t r = 0; r < regexes_.size(); ++r) {
    std::vector<std::string_view>& out = r + 1 == regexes_.size() ? pieces : next;
    for (std::string_view piece : current) split_isolated(regexes_[r]->code, regexes_[r]->jit, piece, out);
    if (&out == &next) {
      current.swap(next);
      next.clear();
    }
  }
}

}  // namespace causal
