// Chat templates without a Jinja engine: the known families recognised from a model's template text and
// rendered in C++, as the prompt for `causal generate --chat` and as spans that mark the supervised tokens
// of instruction tuning. docs/chat.md has the table of families and what each does with a system message.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace causal {

// Each family renders exactly what its reference template (tests/interop/chat_templates/NAME.jinja) renders
// under transformers' settings, where that template accepts the conversation; docs/chat.md lists the
// published templates of a family that differ and are therefore not recognised.
enum class ChatFamily {
  kChatMl,   // <|im_start|>role\n...<|im_end|>\n (OpenHermes, SmolLM2, Qwen2)
  kLlama3,   // Meta-Llama-3-Instruct: <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  kLlama31,  // Llama 3.1 / 3.2 / 3.3: Llama 3's turns after a system block with a knowledge date and a date
  kLlama2,   // Llama-2-chat: <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
  kGemma,    // Gemma 3 (and 1/2 without a system message): <start_of_turn>user\n...<end_of_turn>\n
  kMistral,  // Mistral-7B-Instruct-v0.2 / Mixtral-8x7B-Instruct-v0.1: <s>[INST] ... [/INST]...</s>
  kPhi3,     // Phi-3.5-mini / Phi-3-mini (current): <|user|>\n...<|end|>\n
  kZephyr,   // zephyr-7b-beta: <|user|>\n...</s>\n
};

// role is "system", "user" or "assistant"; anything else is a UsageError when rendered.
struct ChatMessage {
  std::string role;
  std::string content;
};

// A family plus what the template text adds to it.
struct ChatFormat {
  ChatFamily family = ChatFamily::kChatMl;
  // ChatML templates such as SmolLM2's and Qwen2's write a fixed system message when the conversation does
  // not open with one; "" means none.
  std::string default_system;
  // Llama 3.1+: the "Today Date: " of the system block, e.g. "26 Jul 2024"; "" means today's (local time).
  std::string date;
};

// The family whose marks the template text carries (llama.cpp's way: marker substrings, not parsing), or
// nullopt for an unknown template and for the published variants of a family whose default output differs
// from ours (Mistral v3/v7's [AVAILABLE_TOOLS] / [SYSTEM_PROMPT], Phi-4, Phi-4-mini).
std::optional<ChatFamily> detect_chat_family(const std::string& template_text);
// detect_chat_family plus what the template text adds: the ChatML default system message, and the Llama 3.1+
// date (today's, as transformers passes strftime_now, where the template asks for it; else its fixed one).
std::optional<ChatFormat> detect_chat_format(const std::string& template_text);
// The fixed system message a ChatML template writes as one string literal '<|im_start|>system\n...<|im_end|>'
// (its Jinja escapes undone), or "" when it has none.
std::string chatml_default_system(const std::string& template_text);
// The "Today Date" a Llama 3.1+ template writes: its fixed `date_string` default (3.1: "26 Jul 2024"), or ""
// (today's) when it asks for strftime_now (3.2) or names none.
std::string llama31_date(const std::string& template_text);

// "chatml", "llama3", "llama3.1", "llama2", "gemma", "mistral", "phi3", "zephyr"; UsageError listing them
// otherwise.
ChatFamily chat_family_from_name(const std::string& name);
std::string chat_family_name(ChatFamily family);
std::vector<std::string> chat_family_names();

// A piece of the rendered text. supervised: the assistant's own text, from after the assistant's opening
// (what add_generation_prompt writes) through its end-of-turn marker; the rest is context that instruction
// tuning does not score. Concatenated, the spans are render_chat's text.
struct ChatSpan {
  std::string text;
  bool supervised = false;
};

// The prompt text: every message, then the assistant's opening when add_generation_prompt. bos_text is the
// BOS token's text for the families whose template writes it (Llama 2/3/3.1, Gemma, Mistral), "" to leave it
// out (a tokenizer that adds BOS itself); ChatML, Phi-3 and Zephyr write none and ignore it. An empty
// conversation, an unknown role, or an order of roles the family's template rejects is a UsageError.
std::string render_chat(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos_text);
std::string render_chat(ChatFamily family, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos_text);
std::vector<ChatSpan> render_chat_spans(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, const std::string& bos_text);
std::vector<ChatSpan> render_chat_spans(ChatFamily family, const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, const std::string& bos_text);

// The texts at which generation stops: the family's end-of-turn token first, then its vocabulary's
// end-of-sequence tokens where they differ ("<|eot_id|>", "<|end_of_text|>" for Llama 3).
std::vector<std::string> chat_stop_texts(ChatFamily family);

}  // namespace causal
