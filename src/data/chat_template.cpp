// Chat families recognised by marker substrings and rendered as their reference Jinja templates would render.
#include "data/chat_template.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdint>
#include <ctime>

#include "core/errors.h"

namespace causal {

namespace {

bool has_mark(const std::string& text, const char* mark) { return text.find(mark) != std::string::npos; }

// Python's str.isspace for one code point: Jinja's trim filter and str.strip() are Python's strip().
bool python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

// The code point of the well-formed UTF-8 sequence text[at, at+len), or UINT32_MAX (never a space) otherwise.
uint32_t code_point_at(const std::string& text, size_t at, size_t len) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  const size_t want = lead < 0x80         ? 1
                      : (lead >> 5) == 6  ? 2
                      : (lead >> 4) == 14 ? 3
                      : (lead >> 3) == 30 ? 4
                                          : 0;
  if (want == 0 || want != len) return UINT32_MAX;
  uint32_t cp = want == 1 ? lead : lead & (0x7f >> want);
  for (size_t i = 1; i < want; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return UINT32_MAX;
    cp = (cp << 6) | (byte(i) & 0x3f);
  }
  return cp;
}

size_t utf8_char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
}

// Python's str.strip(): the templates that trim (Llama 2/3, Gemma) must drop exactly what Jinja drops,
// Unicode spaces included, or the prompt differs from the one the model was tuned on.
std::string strip(const std::string& text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t len =
        std::min(utf8_char_length(static_cast<unsigned char>(text[begin])), text.size() - begin);
    if (!python_space(code_point_at(text, begin, len))) break;
    begin += len;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80 && end - start < 4)
      --start;
    if (!python_space(code_point_at(text, start, end - start))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

// Appends text as spans, merging neighbours with the same flag so the spans stay few and whole.
class SpanWriter {
 public:
  void context(const std::string& text) { add(text, false); }
  void supervised(const std::string& text) { add(text, true); }
  std::vector<ChatSpan> take() { return std::move(spans_); }

 private:
  void add(const std::string& text, bool supervised) {
    if (text.empty()) return;
    if (!spans_.empty() && spans_.back().supervised == supervised) {
      spans_.back().text += text;
    } else {
      spans_.push_back({text, supervised});
    }
  }
  std::vector<ChatSpan> spans_;
};

struct FamilyEntry {
  ChatFamily family;
  const char* name;
};

constexpr FamilyEntry kFamilies[] = {
    {ChatFamily::kChatMl, "chatml"}, {ChatFamily::kLlama3, "llama3"}, {ChatFamily::kLlama31, "llama3.1"},
    {ChatFamily::kLlama2, "llama2"}, {ChatFamily::kGemma, "gemma"},   {ChatFamily::kMistral, "mistral"},
    {ChatFamily::kPhi3, "phi3"},     {ChatFamily::kZephyr, "zephyr"},
};

std::string joined_names() {
  std::string out;
  for (const FamilyEntry& entry : kFamilies) out += (out.empty() ? "" : ", ") + std::string(entry.name);
  return out;
}

void check_roles(ChatFamily family, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) {
    throw UsageError("chat template " + chat_family_name(family) + ": the conversation has no messages");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      throw UsageError("chat template " + chat_family_name(family) + ": message " + std::to_string(i) +
                       " has role '" + role + "'; expected system, user or assistant");
    }
  }
}

// The families whose templates raise unless, after an optional first system message, the roles alternate
// user/assistant (Llama 2, Gemma, Mistral): we refuse the same conversations rather than render one the
// model never saw.
void check_alternation(ChatFamily family, const std::vector<ChatMessage>& messages) {
  const size_t first = messages[0].role == "system" ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const char* expected = (i - first) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != expected) {
      throw UsageError("chat template " + chat_family_name(family) + ": message " + std::to_string(i) +
                       " has role '" + messages[i].role + "', expected '" + expected +
                       "': after an optional first system message the roles must alternate user/assistant");
    }
  }
}

// Turns written `before role after content end` and a newline, as ChatML and Zephyr write them: the
// assistant's content and end marker are supervised, the newline after them is not.
void render_marked_turns(const std::vector<ChatMessage>& messages, const std::string& before,
                         const std::string& after, const std::string& end, SpanWriter& out) {
  for (const ChatMessage& m : messages) {
    out.context(before + m.role + after);
    if (m.role == "assistant") {
      out.supervised(m.content + end);
      out.context("\n");
    } else {
      out.context(m.content + end + "\n");
    }
  }
}

void render_chatml(const ChatFormat& format, const std::vector<ChatMessage>& messages, bool generation,
                   SpanWriter& out) {
  if (!format.default_system.empty() && messages[0].role != "system") {
    out.context("<|im_start|>system\n" + format.default_system + "<|im_end|>\n");
  }
  render_marked_turns(messages, "<|im_start|>", "\n", "<|im_end|>", out);
  if (generation) out.context("<|im_start|>assistant\n");
}

void render_llama3(const std::vector<ChatMessage>& messages, bool generation, const std::string& bos,
                   SpanWriter& out) {
  out.context(bos);
  for (const ChatMessage& m : messages) {
    out.context("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
    const std::string body = strip(m.content) + "<|eot_id|>";
    if (m.role == "assistant") {
      out.supervised(body);
    } else {
      out.context(body);
    }
  }
  if (generation) out.context("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Today as Python's datetime.now().strftime("%d %b %Y") writes it ("06 Dec 2026"), which is what the Llama
// 3.2 template gets from transformers' strftime_now; English month names whatever the locale.
std::string today() {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return fmt::format("{:02} {} {}", local.tm_mday, kMonths[local.tm_mon], 1900 + local.tm_year);
}

// Llama 3.1+ always opens with a system block: knowledge date, today's date, then the conversation's own
// system message (trimmed) when it has one first; later messages are Llama 3's turns.
void render_llama31(const ChatFormat& format, const std::vector<ChatMessage>& messages, bool generation,
                    const std::string& bos, SpanWriter& out) {
  const bool has_system = messages[0].role == "system";
  out.context(bos + "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n" +
              "Today Date: " + (format.date.empty() ? today() : format.date) + "\n\n" +
              (has_system ? strip(messages[0].content) : "") + "<|eot_id|>");
  const std::vector<ChatMessage> rest(messages.begin() + (has_system ? 1 : 0), messages.end());
  for (const ChatMessage& m : rest) {
    out.context("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
    const std::string body = strip(m.content) + "<|eot_id|>";
    if (m.role == "assistant") {
      out.supervised(body);
    } else {
      out.context(body);
    }
  }
  if (generation) out.context("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Llama-2-chat writes BOS before every [INST], strips every message, and has no generation prompt: the
// model answers after " [/INST]" with " answer </s>".
void render_llama2(const std::vector<ChatMessage>& messages, const std::string& bos, SpanWriter& out) {
  const bool has_system = messages[0].role == "system";
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string content = m.content;
    if (has_system && i == 1) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    if (m.role == "user") {
      out.context(bos + "[INST] " + strip(content) + " [/INST]");
    } else {
      out.supervised(" " + strip(content) + " </s>");
    }
  }
}

// Gemma 3 folds the system message into the first user turn; every turn's text is trimmed, the system
// message is not.
void render_gemma(const std::vector<ChatMessage>& messages, bool generation, const std::string& bos,
                  SpanWriter& out) {
  const bool has_system = messages[0].role == "system";
  out.context(bos);
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string prefix = has_system && i == 1 ? messages[0].content + "\n\n" : "";
    if (m.role == "assistant") {
      out.context("<start_of_turn>model\n" + prefix);
      out.supervised(strip(m.content) + "<end_of_turn>");
      out.context("\n");
    } else {
      out.context("<start_of_turn>user\n" + prefix + strip(m.content) + "<end_of_turn>\n");
    }
  }
  if (generation) out.context("<start_of_turn>model\n");
}

// The v0.2 template has no system role (it raises); we put a system message before the first user
// message with a blank line, as Mistral's later templates do, and document it. No generation prompt: the
// model answers right after " [/INST]".
void render_mistral(const std::vector<ChatMessage>& messages, const std::string& bos, SpanWriter& out) {
  const bool has_system = messages[0].role == "system";
  out.context(bos);
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      const std::string prefix = has_system && i == 1 ? messages[0].content + "\n\n" : "";
      out.context("[INST] " + prefix + m.content + " [/INST]");
    } else {
      out.supervised(m.content + "</s>");
    }
  }
}

// Phi-3.5 skips an empty system message and ends a conversation without a generation prompt with the
// vocabulary's EOS, "<|endoftext|>".
void render_phi3(const std::vector<ChatMessage>& messages, bool generation, SpanWriter& out) {
  for (const ChatMessage& m : messages) {
    if (m.role == "system" && m.content.empty()) continue;
    out.context("<|" + m.role + "|>\n");
    if (m.role == "assistant") {
      out.supervised(m.content + "<|end|>");
      out.context("\n");
    } else {
      out.context(m.content + "<|end|>\n");
    }
  }
  out.context(generation ? "<|assistant|>\n" : "<|endoftext|>");
}

void render_zephyr(const std::vector<ChatMessage>& messages, bool generation, SpanWriter& out) {
  render_marked_turns(messages, "<|", "|>\n", "</s>", out);
  if (generation) out.context("<|assistant|>\n");
}

}  // namespace

std::optional<ChatFamily> detect_chat_family(const std::string& t) {
  if (has_mark(t, "<|im_start|>")) {
    // Phi-4 puts <|im_sep|> after the role, SmolVLM's turns are not ChatML's: both only borrow the token.
    if (has_mark(t, "<|im_sep|>") || has_mark(t, "<end_of_utterance>")) return std::nullopt;
    return ChatFamily::kChatMl;
  }
  if (has_mark(t, "<|start_header_id|>") && has_mark(t, "<|end_header_id|>")) {
    // Llama 3.1 and later always write a system block with a knowledge date and today's date.
    return has_mark(t, "Cutting Knowledge Date") ? ChatFamily::kLlama31 : ChatFamily::kLlama3;
  }
  if (has_mark(t, "<start_of_turn>")) return ChatFamily::kGemma;
  if (has_mark(t, "[INST]")) {
    if (has_mark(t, "<<SYS>>")) return ChatFamily::kLlama2;
    // Mistral v3/v7 (tools, [SYSTEM_PROMPT]) and the v3 spacing "[/INST]" without a space before it.
    if (has_mark(t, "[AVAILABLE_TOOLS]") || has_mark(t, "[SYSTEM_PROMPT]") || has_mark(t, "[TOOL_CALLS]")) {
      return std::nullopt;
    }
    return ChatFamily::kMistral;
  }
  if (has_mark(t, "<|assistant|>") && has_mark(t, "<|end|>")) {
    // Phi-4-mini keeps Phi-3's marks but drops the newline after each role (and declares tools in <|tool|>).
    if (has_mark(t, "<|tool|>")) return std::nullopt;
    return ChatFamily::kPhi3;
  }
  // Zephyr ends every turn with the EOS token; Falcon 3 and GLM-Edge use the same role marks without it.
  if (has_mark(t, "<|user|>") && has_mark(t, "<|assistant|>") && has_mark(t, "eos_token")) {
    return ChatFamily::kZephyr;
  }
  return std::nullopt;
}

std::string chatml_default_system(const std::string& t) {
  static const std::string kOpen = "<|im_start|>system";
  static const std::string kEnd = "<|im_end|>";
  for (size_t at = t.find(kOpen); at != std::string::npos; at = t.find(kOpen, at + 1)) {
    // Only a string literal that opens with the system header and runs to <|im_end|> is a fixed message;
    // one that stops at its closing quote is followed by the conversation's own system content.
    if (at == 0 || (t[at - 1] != '\'' && t[at - 1] != '"')) continue;
    const char quote = t[at - 1];
    size_t i = at + kOpen.size();
    if (t.compare(i, 1, "\n") == 0) {
      i += 1;
    } else if (t.compare(i, 2, "\\n") == 0) {
      i += 2;
    } else {
      continue;
    }
    std::string text;
    bool closed = false;
    while (i < t.size()) {
      if (t.compare(i, kEnd.size(), kEnd) == 0) {
        closed = true;
        break;
      }
      const char c = t[i];
      if (c == quote) break;
      if (c == '\\' && i + 1 < t.size()) {  // Jinja string escapes (Python's)
        const char e = t[i + 1];
        if (e == 'n') {
          text += '\n';
        } else if (e == 't') {
          text += '\t';
        } else if (e == 'r') {
          text += '\r';
        } else if (e == '\\' || e == '\'' || e == '"') {
          text += e;
        } else {
          text += c;
          text += e;
        }
        i += 2;
        continue;
      }
      text += c;
      ++i;
    }
    if (closed && !text.empty()) return text;
  }
  return "";
}

std::string llama31_date(const std::string& t) {
  // 3.2 asks for strftime_now, which transformers and llama.cpp define: today. 3.1 sets a fixed default.
  if (has_mark(t, "strftime_now")) return "";
  for (const char* mark : {"set date_string = \"", "set date_string = '"}) {
    const size_t at = t.find(mark);
    if (at == std::string::npos) continue;
    const size_t begin = at + std::char_traits<char>::length(mark);
    const size_t end = t.find(mark[std::char_traits<char>::length(mark) - 1], begin);
    if (end != std::string::npos) return t.substr(begin, end - begin);
  }
  return "";
}

std::optional<ChatFormat> detect_chat_format(const std::string& template_text) {
  const std::optional<ChatFamily> family = detect_chat_family(template_text);
  if (!family) return std::nullopt;
  ChatFormat format;
  format.family = *family;
  if (*family == ChatFamily::kChatMl) format.default_system = chatml_default_system(template_text);
  if (*family == ChatFamily::kLlama31) format.date = llama31_date(template_text);
  return format;
}

ChatFamily chat_family_from_name(const std::string& name) {
  for (const FamilyEntry& entry : kFamilies) {
    if (name == entry.name) return entry.family;
  }
  throw UsageError("unknown chat template '" + name + "'; expected one of: " + joined_names());
}

std::string chat_family_name(ChatFamily family) {
  for (const FamilyEntry& entry : kFamilies) {
    if (entry.family == family) return entry.name;
  }
  return "unknown";
}

std::vector<std::string> chat_family_names() {
  std::vector<std::string> names;
  for (const FamilyEntry& entry : kFamilies) names.push_back(entry.name);
  return names;
}

std::vector<ChatSpan> render_chat_spans(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, const std::string& bos_text) {
  check_roles(format.family, messages);
  SpanWriter out;
  switch (format.family) {
    case ChatFamily::kChatMl:
      render_chatml(format, messages, add_generation_prompt, out);
      break;
    case ChatFamily::kLlama3:
      render_llama3(messages, add_generation_prompt, bos_text, out);
      break;
    case ChatFamily::kLlama31:
      render_llama31(format, messages, add_generation_prompt, bos_text, out);
      break;
    case ChatFamily::kLlama2:
      check_alternation(format.family, messages);
      render_llama2(messages, bos_text, out);
      break;
    case ChatFamily::kGemma:
      check_alternation(format.family, messages);
      render_gemma(messages, add_generation_prompt, bos_text, out);
      break;
    case ChatFamily::kMistral:
      check_alternation(format.family, messages);
      render_mistral(messages, bos_text, out);
      break;
    case ChatFamily::kPhi3:
      render_phi3(messages, add_generation_prompt, out);
      break;
    case ChatFamily::kZephyr:
      render_zephyr(messages, add_generation_prompt, out);
      break;
  }
  return out.take();
}

std::vector<ChatSpan> render_chat_spans(ChatFamily family, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, const std::string& bos_text) {
  return render_chat_spans(ChatFormat{family, ""}, messages, add_generation_prompt, bos_text);
}

std::string render_chat(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos_text) {
  std::string text;
  for (const ChatSpan& span : render_chat_spans(format, messages, add_generation_prompt, bos_text)) {
    text += span.text;
  }
  return text;
}

std::string render_chat(ChatFamily family, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos_text) {
  return render_chat(ChatFormat{family, ""}, messages, add_generation_prompt, bos_text);
}

std::vector<std::string> chat_stop_texts(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatMl:
      return {"<|im_end|>"};
    case ChatFamily::kLlama3:
      return {"<|eot_id|>", "<|end_of_text|>"};
    case ChatFamily::kLlama31:
      return {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"};
    case ChatFamily::kLlama2:
    case ChatFamily::kMistral:
    case ChatFamily::kZephyr:
      return {"</s>"};
    case ChatFamily::kGemma:
      return {"<end_of_turn>", "<eos>"};
    case ChatFamily::kPhi3:
      return {"<|end|>", "<|endoftext|>"};
  }
  return {};
}

}  // namespace causal
