// Chat templates in C++: each family recognised from template text in its published style (and the
// variants we do not render refused), rendered against expected strings written out by hand from the
// published templates, spans that reassemble the render and mark only the assistant's text, stop texts, and
// the errors. tests/interop/test_chat_templates.cpp compares the same renders with jinja2's.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/errors.h"
#include "data/chat_template.h"

using namespace causal;

namespace {

// The published templates (model metadata every converter copies), in the forms their GGUF files carry.
const std::string kOpenHermes =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
const std::string kSmolLm2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' "
    "}}{% "
    "endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor "
    "%}{% "
    "if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
// Qwen2-Instruct's, with the escapes left in the Jinja string literal (as a tokenizer_config.json decodes).
const std::string kQwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
    "add_generation_prompt "
    "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const std::string kPhi4 =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + "
    "'<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif "
    "%}";
const std::string kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 "
    "== 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if "
    "add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
// The opening of Llama 3.1's, enough to carry its dated system block and its fixed date.
const std::string kLlama31 =
    "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" "
    "%}\n{%- endif "
    "%}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: December "
    "2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{%- for message in messages %}\n      "
    "  {{- "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' }}\n{%- endfor %}";
const std::string kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% "
    "endif "
    "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% "
    "if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif "
    "%}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
    "message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
const std::string kGemma2 =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') "
    "}}{% "
    "endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% "
    "if "
    "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% "
    "endif "
    "%}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% "
    "if "
    "add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";
const std::string kMistral =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) "
    "%}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% "
    "if "
    "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles "
    "are supported!') }}{% endif %}{% endfor %}";
// The part of Mistral v3's tool-calling template that marks it.
const std::string kMistralV3Tools =
    "{%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == "
    "user_messages[-1]) "
    "%}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n{%- endif %}\n            {{- \"[INST] \" + "
    "message[\"content\"] "
    "+ \"[/INST]\" }}";
const std::string kPhi35 =
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] "
    "%}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + "
    "'<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + "
    "'<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ "
    "eos_token }}{% endif %}";
const std::string kZephyr =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] "
    "+ "
    "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + "
    "eos_token }}\n{% "
    "elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% "
    "endif "
    "%}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
// Phi-4-mini's: Phi-3's marks without the newline after the role.
const std::string kPhi4Mini =
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
    "message['tools'] is "
    "not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + "
    "'<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' "
    "}}{% "
    "endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% "
    "endif %}";
// Falcon 3's role marks without an end token per turn.
const std::string kFalcon3 =
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}{% "
    "endfor "
    "%}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}{{ '<|user|>' }}";

const std::vector<ChatMessage> kOneTurn = {{"user", "Hi"}};
const std::vector<ChatMessage> kWithSystem = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
// Edges the trimming families strip (Llama 2/3, Gemma) and the others keep.
const std::vector<ChatMessage> kEdgeSpaces = {{"user", " q \n"}, {"assistant", "\ta\xc2\xa0"}};

std::string concatenated(const std::vector<ChatSpan>& spans) {
  std::string out;
  for (const ChatSpan& s : spans) out += s.text;
  return out;
}

std::vector<std::string> supervised(const std::vector<ChatSpan>& spans) {
  std::vector<std::string> out;
  for (const ChatSpan& s : spans) {
    if (s.supervised) out.push_back(s.text);
  }
  return out;
}

}  // namespace

CATCH_TEST_CASE("chat: each family is recognised from its published template text", "[unit]") {
  CATCH_CHECK(detect_chat_family(kOpenHermes) == ChatFamily::kChatMl);
  CATCH_CHECK(detect_chat_family(kSmolLm2) == ChatFamily::kChatMl);
  CATCH_CHECK(detect_chat_family(kQwen2) == ChatFamily::kChatMl);
  CATCH_CHECK(detect_chat_family(kLlama3) == ChatFamily::kLlama3);
  CATCH_CHECK(detect_chat_family(kLlama31) == ChatFamily::kLlama31);
  CATCH_CHECK(detect_chat_family(kLlama2) == ChatFamily::kLlama2);
  CATCH_CHECK(detect_chat_family(kGemma2) == ChatFamily::kGemma);
  CATCH_CHECK(detect_chat_family(kMistral) == ChatFamily::kMistral);
  CATCH_CHECK(detect_chat_family(kPhi35) == ChatFamily::kPhi3);
  CATCH_CHECK(detect_chat_family(kZephyr) == ChatFamily::kZephyr);
}

CATCH_TEST_CASE("chat: unknown templates and variants we render differently are not recognised", "[unit]") {
  CATCH_CHECK_FALSE(detect_chat_family("").has_value());
  CATCH_CHECK_FALSE(
      detect_chat_family("{% for m in messages %}{{ m['content'] }}\n{% endfor %}").has_value());
  CATCH_CHECK_FALSE(detect_chat_family(kPhi4).has_value());
  CATCH_CHECK_FALSE(detect_chat_family(kPhi4Mini).has_value());
  CATCH_CHECK_FALSE(detect_chat_family(kMistralV3Tools).has_value());
  CATCH_CHECK_FALSE(detect_chat_family(kFalcon3).has_value());
  CATCH_CHECK_FALSE(detect_chat_format(kFalcon3).has_value());
}

CATCH_TEST_CASE("chat: a ChatML template's fixed system message is read from its text", "[unit]") {
  CATCH_CHECK(chatml_default_system(kSmolLm2) ==
              "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  CATCH_CHECK(chatml_default_system(kQwen2) == "You are a helpful assistant.");
  // The plain template opens a system turn only with the conversation's own content.
  CATCH_CHECK(chatml_default_system(kOpenHermes).empty());
  CATCH_CHECK(
      chatml_default_system("{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>' }}").empty());
  // Jinja escapes inside the literal are undone; an escaped quote does not end it.
  CATCH_CHECK(chatml_default_system("{{ \"<|im_start|>system\\nSay \\\"hi\\\"\\tnow<|im_end|>\\n\" }}") ==
              "Say \"hi\"\tnow");
  const std::optional<ChatFormat> format = detect_chat_format(kSmolLm2);
  CATCH_REQUIRE(format.has_value());
  CATCH_CHECK(format->family == ChatFamily::kChatMl);
  CATCH_CHECK(format->default_system ==
              "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  CATCH_CHECK(detect_chat_format(kLlama3)->default_system.empty());
}

CATCH_TEST_CASE("chat: ChatML renders every message, the default system message only when none leads",
                "[unit]") {
  CATCH_CHECK(render_chat(ChatFamily::kChatMl, kOneTurn, true, "<s>") ==
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CATCH_CHECK(render_chat(ChatFamily::kChatMl, kWithSystem, false, "") ==
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
  const ChatFormat smol{ChatFamily::kChatMl, "You are SmolLM"};
  CATCH_CHECK(render_chat(smol, kOneTurn, true, "") ==
              "<|im_start|>system\nYou are "
              "SmolLM<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CATCH_CHECK(render_chat(smol, kWithSystem, false, "") ==
              render_chat(ChatFamily::kChatMl, kWithSystem, false, ""));
  CATCH_CHECK(render_chat(ChatFamily::kChatMl, kEdgeSpaces, false, "") ==
              "<|im_start|>user\n q \n<|im_end|>\n<|im_start|>assistant\n\ta\xc2\xa0<|im_end|>\n");
}

CATCH_TEST_CASE("chat: Llama 3 trims every message and writes BOS once", "[unit]") {
  CATCH_CHECK(render_chat(ChatFamily::kLlama3, kOneTurn, true, "<|begin_of_text|>") ==
              "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CATCH_CHECK(render_chat(ChatFamily::kLlama3, kWithSystem, false, "") ==
              "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>");
  // The no-break space is whitespace to Python's strip().
  CATCH_CHECK(render_chat(ChatFamily::kLlama3, kEdgeSpaces, false, "") ==
              "<|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\na<|eot_id|>");
}

CATCH_TEST_CASE("chat: Llama 3.1 opens with a dated system block that holds the system message", "[unit]") {
  // 3.1's fixed date; 3.2's strftime_now means today's, left empty in the format.
  CATCH_CHECK(llama31_date(kLlama31) == "26 Jul 2024");
  CATCH_CHECK(detect_chat_format(kLlama31)->date == "26 Jul 2024");
  CATCH_CHECK(llama31_date("{%- set date_string = strftime_now(\"%d %b %Y\") %}").empty());
  const ChatFormat format{ChatFamily::kLlama31, "", "26 Jul 2024"};
  CATCH_CHECK(render_chat(format, kOneTurn, true, "<|begin_of_text|>") ==
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
              "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const std::vector<ChatMessage> spaced = {{"system", " Be brief. "}, {"user", " Hi "}, {"system", "later"}};
  CATCH_CHECK(render_chat(format, spaced, false, "") ==
              "<|start_header_id|>system<|end_header_id|>\n\n"
              "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>system<|end_header_id|>\n\nlater<|eot_id|>");
  // Without a date, today's: "DD Mon YYYY".
  const std::string text = render_chat(ChatFamily::kLlama31, kOneTurn, false, "");
  const std::string mark = "Today Date: ";
  const size_t at = text.find(mark);
  CATCH_REQUIRE(at != std::string::npos);
  const std::string date = text.substr(at + mark.size(), text.find('\n', at) - at - mark.size());
  CATCH_CHECK(date.size() == 11);
  CATCH_CHECK(date[2] == ' ');
  CATCH_CHECK(date[6] == ' ');
}

CATCH_TEST_CASE("chat: Llama 2 puts the system message in <<SYS>> and BOS before every [INST]", "[unit]") {
  CATCH_CHECK(render_chat(ChatFamily::kLlama2, kOneTurn, true, "<s>") == "<s>[INST] Hi [/INST]");
  CATCH_CHECK(render_chat(ChatFamily::kLlama2, kWithSystem, true, "<s>") ==
              "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Bye [/INST]");
  // No generation prompt exists: the model answers after " [/INST]" either way.
  CATCH_CHECK(render_chat(ChatFamily::kLlama2, kWithSystem, false, "") ==
              "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s>[INST] Bye [/INST]");
  CATCH_CHECK(render_chat(ChatFamily::kLlama2, kEdgeSpaces, false, "<s>") == "<s>[INST] q [/INST] a </s>");
}

CATCH_TEST_CASE("chat: Gemma folds the system message into the first user turn and trims turns", "[unit]") {
  CATCH_CHECK(render_chat(ChatFamily::kGemma, kOneTurn, true, "<bos>") ==
              "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  CATCH_CHECK(render_chat(ChatFamily::kGemma, kWithSystem, false, "") ==
              "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
              "<start_of_turn>user\nBye<end_of_turn>\n");
  // The system text itself is not trimmed; the user text after it is.
  const std::vector<ChatMessage> spaced = {{"system", " S "}, {"user", " u "}};
  CATCH_CHECK(render_chat(ChatFamily::kGemma, spaced, true, "") ==
              "<start_of_turn>user\n S \n\nu<end_of_turn>\n<start_of_turn>model\n");
}

CATCH_TEST_CASE("chat: Mistral writes [INST] turns and puts a system message before the first user turn",
                "[unit]") {
  CATCH_CHECK(render_chat(ChatFamily::kMistral, kOneTurn, true, "<s>") == "<s>[INST] Hi [/INST]");
  CATCH_CHECK(render_chat(ChatFamily::kMistral, kWithSystem, false, "<s>") ==
              "<s>[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Bye [/INST]");
  // Mistral's template keeps the text as written.
  CATCH_CHECK(render_chat(ChatFamily::kMistral, kEdgeSpaces, false, "") ==
              "[INST]  q \n [/INST]\ta\xc2\xa0</s>");
}

CATCH_TEST_CASE("chat: Phi-3 skips an empty system message and ends without a prompt on EOS", "[unit]") {
  CATCH_CHECK(render_chat(ChatFamily::kPhi3, kOneTurn, true, "<s>") ==
              "<|user|>\nHi<|end|>\n<|assistant|>\n");
  CATCH_CHECK(render_chat(ChatFamily::kPhi3, kWithSystem, false, "") ==
              "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n"
              "<|user|>\nBye<|end|>\n<|endoftext|>");
  CATCH_CHECK(render_chat(ChatFamily::kPhi3, {{"system", ""}, {"user", "Hi"}}, true, "") ==
              "<|user|>\nHi<|end|>\n<|assistant|>\n");
}

CATCH_TEST_CASE("chat: Zephyr ends every turn with </s> and a newline", "[unit]") {
  CATCH_CHECK(render_chat(ChatFamily::kZephyr, kWithSystem, true, "<s>") ==
              "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n<|user|>\nBye</s>\n"
              "<|assistant|>\n");
}

CATCH_TEST_CASE("chat: spans reassemble the render and supervise only the assistant's text", "[unit]") {
  const std::vector<ChatMessage> two_answers = {{"system", "Be brief."},
                                                {"user", "Hi"},
                                                {"assistant", "Hello."},
                                                {"user", "Bye"},
                                                {"assistant", "Bye!"}};
  for (const std::string& name : chat_family_names()) {
    const ChatFamily family = chat_family_from_name(name);
    CATCH_INFO(name);
    for (const bool generation : {true, false}) {
      const std::vector<ChatSpan> spans = render_chat_spans(family, two_answers, generation, "<s>");
      CATCH_CHECK(concatenated(spans) == render_chat(family, two_answers, generation, "<s>"));
      // One supervised span per assistant message, ending in the family's end-of-turn text.
      const std::vector<std::string> taught = supervised(spans);
      CATCH_REQUIRE(taught.size() == 2);
      const std::string stop = chat_stop_texts(family).front();
      for (const std::string& t : taught) {
        CATCH_CHECK(t.size() > stop.size());
        CATCH_CHECK(t.compare(t.size() - stop.size(), stop.size(), stop) == 0);
        CATCH_CHECK(t.find("Hi") == std::string::npos);
      }
      for (size_t i = 1; i < spans.size(); ++i) CATCH_CHECK(spans[i].supervised != spans[i - 1].supervised);
    }
  }
  // Exactly the text the model writes after the assistant's opening.
  CATCH_CHECK(supervised(render_chat_spans(ChatFamily::kChatMl, two_answers, false, "")) ==
              std::vector<std::string>{"Hello.<|im_end|>", "Bye!<|im_end|>"});
  CATCH_CHECK(supervised(render_chat_spans(ChatFamily::kLlama2, two_answers, false, "")) ==
              std::vector<std::string>{" Hello. </s>", " Bye! </s>"});
  CATCH_CHECK(supervised(render_chat_spans(ChatFamily::kGemma, two_answers, false, "")) ==
              std::vector<std::string>{"Hello.<end_of_turn>", "Bye!<end_of_turn>"});
  CATCH_CHECK(supervised(render_chat_spans(ChatFamily::kLlama3, two_answers, false, "")) ==
              std::vector<std::string>{"Hello.<|eot_id|>", "Bye!<|eot_id|>"});
  // Phi-3's closing EOS follows the last turn's end marker and is not taught.
  const std::vector<ChatSpan> phi = render_chat_spans(ChatFamily::kPhi3, two_answers, false, "");
  CATCH_CHECK(phi.back().text == "\n<|endoftext|>");
  CATCH_CHECK_FALSE(phi.back().supervised);
  // A prompt alone teaches nothing.
  CATCH_CHECK(supervised(render_chat_spans(ChatFamily::kChatMl, kOneTurn, true, "")).empty());
}

CATCH_TEST_CASE("chat: stop texts are each family's end of turn, then its EOS", "[unit]") {
  CATCH_CHECK(chat_stop_texts(ChatFamily::kChatMl) == std::vector<std::string>{"<|im_end|>"});
  CATCH_CHECK(chat_stop_texts(ChatFamily::kLlama3) ==
              std::vector<std::string>{"<|eot_id|>", "<|end_of_text|>"});
  CATCH_CHECK(chat_stop_texts(ChatFamily::kLlama31) ==
              std::vector<std::string>{"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"});
  CATCH_CHECK(chat_stop_texts(ChatFamily::kLlama2) == std::vector<std::string>{"</s>"});
  CATCH_CHECK(chat_stop_texts(ChatFamily::kGemma) == std::vector<std::string>{"<end_of_turn>", "<eos>"});
  CATCH_CHECK(chat_stop_texts(ChatFamily::kMistral) == std::vector<std::string>{"</s>"});
  CATCH_CHECK(chat_stop_texts(ChatFamily::kPhi3) == std::vector<std::string>{"<|end|>", "<|endoftext|>"});
  CATCH_CHECK(chat_stop_texts(ChatFamily::kZephyr) == std::vector<std::string>{"</s>"});
}

CATCH_TEST_CASE("chat: family names round trip and an unknown name lists the choices", "[unit]") {
  const std::vector<std::string> names = chat_family_names();
  CATCH_CHECK(names == std::vector<std::string>{"chatml", "llama3", "llama3.1", "llama2", "gemma", "mistral",
                                                "phi3", "zephyr"});
  for (const std::string& name : names) CATCH_CHECK(chat_family_name(chat_family_from_name(name)) == name);
  CATCH_CHECK_THROWS_WITH(chat_family_from_name("vicuna"),
                          Catch::Contains("vicuna") && Catch::Contains("chatml, llama3, llama3.1, llama2"));
  CATCH_CHECK_THROWS_AS(chat_family_from_name("ChatML"), UsageError);
}

CATCH_TEST_CASE("chat: empty conversations, unknown roles and rejected orders are usage errors", "[unit]") {
  for (const std::string& name : chat_family_names()) {
    const ChatFamily family = chat_family_from_name(name);
    CATCH_INFO(name);
    CATCH_CHECK_THROWS_AS(render_chat(family, {}, true, ""), UsageError);
    CATCH_CHECK_THROWS_WITH(render_chat(family, {{"user", "a"}, {"tool", "b"}}, true, ""),
                            Catch::Contains("message 1") && Catch::Contains("'tool'"));
    CATCH_CHECK_THROWS_AS(render_chat_spans(family, {{"narrator", "a"}}, true, ""), UsageError);
  }
  // The alternating families refuse what their templates raise on; the others render any order.
  const std::vector<ChatMessage> two_users = {{"user", "a"}, {"user", "b"}};
  const std::vector<ChatMessage> late_system = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}};
  for (const ChatFamily family : {ChatFamily::kLlama2, ChatFamily::kGemma, ChatFamily::kMistral}) {
    CATCH_CHECK_THROWS_WITH(render_chat(family, two_users, true, ""),
                            Catch::Contains("message 1") && Catch::Contains("alternate"));
    CATCH_CHECK_THROWS_AS(render_chat(family, late_system, true, ""), UsageError);
    CATCH_CHECK_THROWS_AS(render_chat(family, {{"assistant", "first"}}, true, ""), UsageError);
  }
  CATCH_CHECK(render_chat(ChatFamily::kChatMl, two_users, false, "") ==
              "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n");
}
