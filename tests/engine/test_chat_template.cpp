// Chat templates: each expected prompt is what the named Hugging Face template renders for
// the same messages with add_generation_prompt=True (worked through the template text by
// hand; the template lines are quoted in engine/chat/chat_template.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/lab/gguf_writer.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/chat_template_texts.h"
#include "tests/test_support.h"

using kvdesk::ChatMessage;
using kvdesk::ChatSpecialTexts;
using kvdesk::ChatTemplate;
using Catch::Matchers::Contains;

namespace {

const std::vector<ChatMessage> kOneTurn = {{"user", "Hi"}};
const std::vector<ChatMessage> kWithSystem = {
    {"system", "You are kind."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Again"}};

ChatTemplate family(const char* name) { return kvdesk::builtin_chat_template(name); }

// A model's own template from its Jinja source.
ChatTemplate own(std::string_view source) {
  ChatTemplate t = kvdesk::chat_template_from_source("own", std::string(source));
  REQUIRE(t.error.empty());
  return t;
}

std::string render(const char* family_name, const std::vector<ChatMessage>& messages, const ChatSpecialTexts& specials) {
  return kvdesk::joined_text(kvdesk::render_chat(family(family_name), messages, specials));
}

const ChatSpecialTexts kSpm{"<s>", "</s>"};
const ChatSpecialTexts kGraniteSpecials{"<|end_of_text|>", "<|end_of_text|>"};

// 5 April 2025, the day the tests' strftime_now() dates show.
std::tm april_5_2025() {
  std::tm date{};
  date.tm_year = 2025 - 1900;
  date.tm_mon = 3;
  date.tm_mday = 5;
  return date;
}

std::string render_on_april_5(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                              const ChatSpecialTexts& specials) {
  return kvdesk::joined_text(kvdesk::render_chat(t, messages, specials, april_5_2025()));
}

const std::vector<ChatMessage> kSystemAndUser = {{"system", "Be brief."}, {"user", "Hi"}};

// A byte-level BPE vocabulary of the 256 single bytes and the given control tokens (no merges),
// EOS and BOS among them.
std::unique_ptr<kvdesk::Tokenizer> byte_vocab_with(const std::string& pre, const std::vector<std::string>& controls,
                                                   const std::string& bos, const std::string& eos) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(kvdesk::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
    types.push_back(1);
  }
  const auto id_of = [&](const std::string& piece) {
    return static_cast<uint32_t>(256 + (std::find(controls.begin(), controls.end(), piece) - controls.begin()));
  };
  for (const std::string& piece : controls) {
    tokens.push_back(piece);
    types.push_back(3);
  }
  const kvdesk::test::TempDir dir;
  kvdesk::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_int32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", {});
  w.add_uint32("tokenizer.ggml.bos_token_id", id_of(bos));
  w.add_uint32("tokenizer.ggml.eos_token_id", id_of(eos));
  w.write(dir.file("vocab.gguf"));
  return kvdesk::Tokenizer::from_gguf(*kvdesk::GgufFile::open(dir.file("vocab.gguf")));
}

// The id the template writes right after the assistant's answer `answer` in ids.
int32_t id_after(const kvdesk::Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& answer) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    text += tok.token_bytes(ids[i]);
    if (text.ends_with(answer)) return i + 1 < ids.size() ? ids[i + 1] : -1;
  }
  return -1;
}

}  // namespace

TEST_CASE("ChatML (Qwen2.5-Instruct's template)", "[engine][chat]") {
  const ChatSpecialTexts none{"", "<|im_end|>"};
  CHECK(render("chatml", kOneTurn, none) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render("chatml", kWithSystem, none) ==
        "<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("Qwen's default system prompt is written by its own template when there is no system message", "[engine][chat]") {
  // Qwen2.5-7B-Instruct's template without its tools branch.
  const ChatTemplate t = own(
      R"({%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }})"
      R"({%- else %}{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }})"
      R"({%- endif %}{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %})"
      R"({{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endif %}{%- endfor %})"
      R"({%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})");
  CHECK(t.warning.empty());
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, kOneTurn, {})) ==
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A system message replaces the default.
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, {{"system", "S"}, {"user", "Hi"}}, {})) ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("Llama 3 (Meta-Llama-3-8B-Instruct's template): BOS once, contents trimmed", "[engine][chat]") {
  const ChatSpecialTexts llama3{"<|begin_of_text|>", "<|end_of_text|>"};
  CHECK(render("llama3", {{"user", "  Hi \n"}}, llama3) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(render("llama3", kWithSystem, llama3) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are kind.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("Llama 3.1 (Llama-3.1-8B-Instruct's template without tools): a system turn with the date preamble, always", "[engine][chat]") {
  const ChatTemplate t = own(
      R"({{- bos_token }}{%- if not date_string is defined %}{%- set date_string = "26 Jul 2024" %}{%- endif %})"
      R"({%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %})"
      R"({%- set messages = messages[1:] %}{%- else %}{%- set system_message = "" %}{%- endif %})"
      R"({{- "<|start_header_id|>system<|end_header_id|>\n\n" }}{{- "Cutting Knowledge Date: December 2023\n" }})"
      R"({{- "Today Date: " + date_string + "\n\n" }}{{- system_message }}{{- "<|eot_id|>" }})"
      R"({%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}{%- endfor %})"
      R"({%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %})");
  const ChatSpecialTexts llama3{"<|begin_of_text|>", "<|eot_id|>"};
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, kOneTurn, llama3)) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, {{"system", " Be brief. "}, {"user", "Hi"}}, llama3)) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("Llama 3.2 (Llama-3.2-1B-Instruct's template): the preamble shows the day it is rendered for", "[engine][chat]") {
  const ChatTemplate t = own(kvdesk::test::kLlama32Template);
  CHECK(t.warning.empty());
  const ChatSpecialTexts llama3{"<|begin_of_text|>", "<|eot_id|>"};
  CHECK(render_on_april_5(t, kOneTurn, llama3) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 05 Apr 2025\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  std::tm new_year{};
  new_year.tm_year = 2027 - 1900;
  new_year.tm_mday = 1;
  CHECK_THAT(kvdesk::joined_text(kvdesk::render_chat(t, kSystemAndUser, llama3, new_year)),
             Contains("Today Date: 01 Jan 2027\n\nBe brief.<|eot_id|>"));
}

TEST_CASE("Llama 2 (Llama-2-7b-chat-hf's template): <<SYS>> in the first [INST], BOS per turn", "[engine][chat]") {
  CHECK(render("llama2", {{"user", " Hi "}}, kSpm) == "<s>[INST] Hi [/INST]");
  CHECK(render("llama2", kWithSystem, kSpm) ==
        "<s>[INST] <<SYS>>\nYou are kind.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Again [/INST]");
}

TEST_CASE("Mistral (Mistral-7B-Instruct-v0.3's template): system before the last user message", "[engine][chat]") {
  CHECK(render("mistral", kOneTurn, kSpm) == "<s>[INST] Hi[/INST]");
  CHECK(render("mistral", kWithSystem, kSpm) ==
        "<s>[INST] Hi[/INST] Hello!</s>[INST] You are kind.\n\nAgain[/INST]");
}

TEST_CASE("Mistral v1 (Mistral-7B-Instruct-v0.2's templates): ' [INST] ' with the system first, or the first template's '[INST] '",
          "[engine][chat]") {
  const ChatTemplate t = family("mistral-v1");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, kWithSystem, kSpm)) ==
        "<s> [INST] You are kind.\n\nHi [/INST] Hello!</s> [INST] Again [/INST]");
  const ChatTemplate unspaced = family("mistral-v1-unspaced");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(unspaced, kWithSystem, kSpm)) ==
        "<s>[INST] You are kind.\n\nHi [/INST]Hello!</s>[INST] Again [/INST]");
}

TEST_CASE("Mistral tekken (Mistral-Nemo-Instruct-2407's template): [INST] and the answer without spaces", "[engine][chat]") {
  const ChatTemplate t = family("mistral-tekken");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(
            t, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Again"}}, {"<s>", "</s>"})) ==
        "<s>[INST]Hi[/INST]Hello</s>[INST]Be brief.\n\nAgain[/INST]");
}

TEST_CASE("Zephyr / TinyLlama-1.1B-Chat-v1.0: eos_token ends every message", "[engine][chat]") {
  CHECK(render("zephyr", kOneTurn, kSpm) == "<|user|>\nHi</s>\n<|assistant|>\n");
  CHECK(render("zephyr", kWithSystem, kSpm) ==
        "<|system|>\nYou are kind.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\nAgain</s>\n"
        "<|assistant|>\n");
}

TEST_CASE("Gemma (gemma-3-it's template): system merged into the first user turn, assistant is model", "[engine][chat]") {
  const ChatSpecialTexts gemma{"<bos>", "<eos>"};
  CHECK(render("gemma", kOneTurn, gemma) == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  CHECK(render("gemma", kWithSystem, gemma) ==
        "<bos><start_of_turn>user\nYou are kind.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nAgain<end_of_turn>\n<start_of_turn>model\n");
}

TEST_CASE("Phi-3 (Phi-3-mini-4k-instruct's template): <|end|> after every message", "[engine][chat]") {
  const ChatSpecialTexts phi3{"<s>", "<|endoftext|>"};
  CHECK(render("phi3", kOneTurn, phi3) == "<|user|>\nHi<|end|>\n<|assistant|>\n");
  CHECK(render("phi3", kWithSystem, phi3) ==
        "<|system|>\nYou are kind.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\nAgain<|end|>\n"
        "<|assistant|>\n");
}

TEST_CASE("Qwen3 (Qwen3-8B's template): ChatML whose earlier assistant turns lose their thinking", "[engine][chat]") {
  const ChatTemplate t = family("qwen3");
  const std::vector<ChatMessage> turns = {{"system", "Be brief."},
                                          {"user", "2+2?"},
                                          {"assistant", "<think>\nadd them\n</think>\n\n4"},
                                          {"user", "3+3?"}};
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, turns, {})) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n");
  // An answer after the last user message keeps its thinking, re-wrapped as the template does.
  const std::vector<ChatMessage> ends_with_answer = {{"user", "2+2?"}, {"assistant", "<think>add</think>4"}};
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, ends_with_answer, {})) ==
        "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nadd\n</think>\n\n4<|im_end|>\n"
        "<|im_start|>assistant\n");
}

TEST_CASE("DeepSeek R1 (DeepSeek-R1-Distill-Qwen's template): the answer opens with <think>, old thinking is dropped", "[engine][chat]") {
  const ChatTemplate t = family("deepseek-r1");
  CHECK(t.warning.empty());
  const ChatSpecialTexts specials{"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"};
  const std::vector<ChatMessage> turns = {{"system", "Be brief."},
                                          {"user", "2+2?"},
                                          {"assistant", "Add them.\n</think>\n\n4"},
                                          {"user", "3+3?"}};
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, turns, specials)) ==
        "<｜begin▁of▁sentence｜>Be brief.<｜User｜>2+2?<｜Assistant｜>\n\n4<｜end▁of▁sentence｜><｜User｜>3+3?"
        "<｜Assistant｜><think>\n");
  // The system prompt is content (never parsed for special tokens) and the last system message wins.
  const std::vector<kvdesk::TextSegment> segments =
      kvdesk::render_chat(t, {{"system", "<｜User｜>"}, {"system", "Be kind."}, {"user", "Hi"}}, specials);
  CHECK(kvdesk::joined_text(segments) == "<｜begin▁of▁sentence｜>Be kind.<｜User｜>Hi<｜Assistant｜><think>\n");
  CHECK(segments.at(1).text == "Be kind.");
  CHECK_FALSE(segments.at(1).parse_special);
}

TEST_CASE("the families whose generation prompt opens <think> are found so by rendering", "[engine][chat]") {
  for (const std::string& name : kvdesk::chat_template_names()) {
    INFO(name);
    CHECK(kvdesk::builtin_chat_template(name).opens_reasoning == (name == "deepseek-r1" || name == "qwen3-thinking"));
  }
}

TEST_CASE("DeepSeek (DeepSeek-R1-0528-Qwen3-8B's template): the assistant tag after the user's turn, no think opener", "[engine][chat]") {
  const ChatTemplate t = family("deepseek");
  const std::vector<ChatMessage> turns = {{"user", "2+2?"}, {"assistant", "<think>add</think>4"}, {"user", "3+3?"}};
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, turns, {"<s>", "</s>"})) ==
        "<s><｜User｜>2+2?<｜Assistant｜>4<｜end▁of▁sentence｜><｜User｜>3+3?<｜Assistant｜>");
}

TEST_CASE("Harmony (gpt-oss-20b's template): its dated system message, instructions, final channels only", "[engine][chat]") {
  const ChatTemplate t = family("harmony");
  CHECK(t.warning.empty());
  const std::string system =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: 2025-04-05\n\nReasoning: medium\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>";
  // An answer as the model wrote it: its reasoning is dropped, its final message kept.
  const std::vector<ChatMessage> turns = {
      {"system", "Be brief."},
      {"user", "2+2?"},
      {"assistant", "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>4"},
      {"user", "3+3?"}};
  CHECK(render_on_april_5(t, turns, {}) ==
        system + "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
                 "<|start|>user<|message|>2+2?<|end|><|start|>assistant<|channel|>final<|message|>4<|end|>"
                 "<|start|>user<|message|>3+3?<|end|><|start|>assistant");
  // Without a system message there are no instructions; an answer without channels is all final,
  // but for reasoning kept in <think> (a remote server's reasoning_content).
  CHECK(render_on_april_5(t, {{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}}, {}) ==
        system + "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello<|end|>"
                 "<|start|>user<|message|>Bye<|end|><|start|>assistant");
  CHECK(render_on_april_5(t, {{"user", "Hi"}, {"assistant", "<think>\nGreet.\n</think>\n\nHello"}, {"user", "Bye"}}, {}) ==
        system + "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello<|end|>"
                 "<|start|>user<|message|>Bye<|end|><|start|>assistant");
  // Message texts are content: a user cannot open a channel.
  const std::vector<kvdesk::TextSegment> segments = kvdesk::render_chat(t, {{"user", "<|channel|>"}}, {}, april_5_2025());
  REQUIRE(segments.size() == 3);
  CHECK(segments[1].text == "<|channel|>");
  CHECK_FALSE(segments[1].parse_special);
}

TEST_CASE("Phi-4-mini (Phi-4-mini-instruct's template): Phi-3's tags without line breaks", "[engine][chat]") {
  const ChatTemplate t = family("phi4-mini");
  CHECK(t.warning.empty());
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Again"}}, {})) ==
        "<|system|>Be brief.<|end|><|user|>Hi<|end|><|assistant|>Hello<|end|><|user|>Again<|end|><|assistant|>");
}

TEST_CASE("Qwen3 thinking (Qwen3-4B-Thinking-2507's template): the answer opened with <think>", "[engine][chat]") {
  const ChatTemplate t = family("qwen3-thinking");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, {{"user", "2+2?"}, {"assistant", "add</think>\n\n4"}, {"user", "3+3?"}}, {})) ==
        "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\n3+3?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n");
  // Opened only when asked to think: a template that does so only with enable_thinking does not.
  CHECK_FALSE(own("{%- if enable_thinking %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %}").opens_reasoning);
}

TEST_CASE("Phi-4 (phi-4's template): <|im_start|>role<|im_sep|> without newlines", "[engine][chat]") {
  const ChatTemplate t = family("phi4");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, kWithSystem, {})) ==
        "<|im_start|>system<|im_sep|>You are kind.<|im_end|><|im_start|>user<|im_sep|>Hi<|im_end|>"
        "<|im_start|>assistant<|im_sep|>Hello!<|im_end|><|im_start|>user<|im_sep|>Again<|im_end|>"
        "<|im_start|>assistant<|im_sep|>");
}

TEST_CASE("Granite (granite-3.x-instruct's template): roles between <|start_of_role|> and <|end_of_role|>", "[engine][chat]") {
  const ChatTemplate t = family("granite");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, kWithSystem, {})) ==
        "<|start_of_role|>system<|end_of_role|>You are kind.<|end_of_text|>\n"
        "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
        "<|start_of_role|>assistant<|end_of_role|>Hello!<|end_of_text|>\n"
        "<|start_of_role|>user<|end_of_role|>Again<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
}

TEST_CASE("Mistral v7 / tekken (Mistral-Small-24B-Instruct-2501's template): [SYSTEM_PROMPT] and [INST] without spaces", "[engine][chat]") {
  const ChatTemplate t = family("mistral-v7");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(t, kWithSystem, kSpm)) ==
        "<s>[SYSTEM_PROMPT]You are kind.[/SYSTEM_PROMPT][INST]Hi[/INST]Hello!</s>[INST]Again[/INST]");
}

TEST_CASE("Granite 3.1 (granite-3.1 instruct's template as its GGUF carries it): a dated default system message", "[engine][chat]") {
  const ChatTemplate t = own(kvdesk::test::kGranite31Template);
  CHECK(t.warning.empty());
  // The else branch with no tools, documents or controls: the literal with its real line
  // breaks, strftime_now('%B %d, %Y'), then " You are a helpful AI assistant.".
  CHECK(render_on_april_5(t, kOneTurn, kGraniteSpecials) ==
        "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024.\nToday's Date: April 05, 2025.\n"
        "You are Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n"
        "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
  // The conversation's own system message replaces it.
  CHECK(render_on_april_5(t, kSystemAndUser, kGraniteSpecials) ==
        "<|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>\n"
        "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
}

TEST_CASE("Granite 3.3 (llama.cpp's granite-3.3-2B-Instruct template): the no-tools, no-documents, no-thinking default", "[engine][chat]") {
  const ChatTemplate t = own(kvdesk::test::kGranite33Template);
  CHECK(t.warning.empty());
  CHECK(render_on_april_5(t, kOneTurn, kGraniteSpecials) ==
        "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: April 05, 2025. "
        "You are Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n"
        "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
  CHECK(render_on_april_5(t, kSystemAndUser, kGraniteSpecials) ==
        "<|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>\n"
        "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
}

TEST_CASE("Mistral Small 3 (Mistral-Small-24B-Instruct-2501's template): default_system_message with today's date", "[engine][chat]") {
  const ChatTemplate t = own(kvdesk::test::kMistralSmall3Template);
  CHECK(t.warning.empty());
  // today = strftime_now("%Y-%m-%d"); the literal's \n and \" escapes decoded.
  CHECK(render_on_april_5(t, kOneTurn, kSpm) ==
        "<s>[SYSTEM_PROMPT]You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French "
        "startup headquartered in Paris.\nYour knowledge base was last updated on 2023-10-01. The current date is "
        "2025-04-05.\n\nWhen you're not sure about some information, you say that you don't have the information "
        "and don't make up anything.\nIf the user's question is not clear, ambiguous, or does not provide enough "
        "context for you to accurately answer the question, you do not try to answer it right away and you rather "
        "ask the user to clarify their request (e.g. \"What are some good restaurants around me?\" => \"Where are "
        "you?\" or \"When is the next flight to Tokyo\" => \"Where do you travel from?\")[/SYSTEM_PROMPT]"
        "[INST]Hi[/INST]");
  CHECK(render_on_april_5(t, kSystemAndUser, kSpm) == "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]");
}

TEST_CASE("String literals read as Python's: escapes decoded, a line break after a backslash joins the lines", "[engine][chat]") {
  const ChatTemplate t = own(
      "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}{%- else %}"
      "{%- set system_message = 'It\\'s \\\"a\\\\b\\\"\\\n joined\\tby ' + strftime_now('%d/%m') %}{%- endif %}"
      "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}");
  CHECK(render_on_april_5(t, kOneTurn, {}) == "[SYSTEM_PROMPT]It's \"a\\b\" joined\tby 05/04[/SYSTEM_PROMPT]");
}

TEST_CASE("Granite's <|end_of_text|> and Mistral v7's </s>, written after each answer, end generation", "[engine][chat][tokenizer]") {
  const std::vector<ChatMessage> turns = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Again"}};

  const auto granite = byte_vocab_with("refact", {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"},
                                       "<|end_of_text|>", "<|end_of_text|>");
  const ChatTemplate granite_template = own(kvdesk::test::kGranite31Template);
  const std::vector<int32_t> granite_ids = kvdesk::encode_chat(*granite, granite_template, turns, april_5_2025());
  const int32_t end_of_text = id_after(*granite, granite_ids, "Hello!");
  CHECK(granite->piece(end_of_text) == "<|end_of_text|>");
  CHECK(granite->is_end_of_generation(end_of_text));
  CHECK_FALSE(granite->is_end_of_generation(granite_ids.back()));   // <|end_of_role|>

  const auto v7 = byte_vocab_with("tekken", {"<s>", "</s>", "[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"},
                                  "<s>", "</s>");
  const ChatTemplate v7_template = own(kvdesk::test::kMistralSmall3Template);
  const std::vector<int32_t> v7_ids = kvdesk::encode_chat(*v7, v7_template, turns, april_5_2025());
  const int32_t eos = id_after(*v7, v7_ids, "Hello!");
  CHECK(v7->piece(eos) == "</s>");
  CHECK(v7->is_end_of_generation(eos));
  CHECK_FALSE(v7->is_end_of_generation(v7_ids.back()));   // [/INST]
}

TEST_CASE("DeepSeek R1's turns are control tokens, BOS is written once and its end of sentence token ends generation", "[engine][chat][tokenizer]") {
  const std::vector<ChatMessage> turns = {{"user", "Hi"}, {"assistant", "<think>hm</think>Hello!"}, {"user", "Again"}};
  const auto vocab = byte_vocab_with("deepseek-r1-qwen",
                                     {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"},
                                     "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>");
  const std::vector<int32_t> ids = kvdesk::encode_chat(*vocab, family("deepseek-r1"), turns);
  const auto count = [&](const std::string& piece) {
    return std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return vocab->piece(id) == piece; });
  };
  CHECK(vocab->piece(ids.front()) == "<｜begin▁of▁sentence｜>");
  CHECK(count("<｜begin▁of▁sentence｜>") == 1);
  CHECK(count("<｜User｜>") == 2);
  CHECK(count("<｜Assistant｜>") == 2);
  const int32_t eos = id_after(*vocab, ids, "Hello!");
  CHECK(vocab->piece(eos) == "<｜end▁of▁sentence｜>");
  CHECK(vocab->is_end_of_generation(eos));
  // The prompt ends with the answer opened: <｜Assistant｜>, then "<think>\n" as text.
  std::string tail;
  for (size_t i = ids.size() - 8; i < ids.size(); ++i) tail += vocab->token_bytes(ids[i]);
  CHECK(tail == "<think>\n");
  CHECK(vocab->piece(ids[ids.size() - 9]) == "<｜Assistant｜>");
}

TEST_CASE("Plain joins messages, an assistant message continues the text", "[engine][chat]") {
  CHECK(render("plain", {{"user", "Once upon"}, {"assistant", " a time"}, {"user", "The end"}}, kSpm) ==
        "Once upon a time\nThe end");
}

TEST_CASE("Message contents are never template segments", "[engine][chat]") {
  for (const std::string& name : kvdesk::chat_template_names()) {
    INFO(name);
    const auto segments = kvdesk::render_chat(kvdesk::builtin_chat_template(name), {{"user", "<|im_end|></s>"}}, kSpm);
    bool seen = false;
    for (const kvdesk::TextSegment& s : segments) {
      if (s.text.find("<|im_end|></s>") != std::string::npos) {
        CHECK_FALSE(s.parse_special);
        seen = true;
      }
    }
    CHECK(seen);
  }
}

TEST_CASE("A template that does not parse is an error naming its line, and one that raises names its message", "[engine][chat]") {
  const ChatTemplate broken = kvdesk::chat_template_from_source("own", "{% for m in messages %}\n{{ m.content }\n");
  CHECK(broken.program == nullptr);
  CHECK_THAT(broken.error, Contains("line 2"));
  CHECK_THAT(broken.warning, Contains("chat template"));
  CHECK_THROWS_WITH(kvdesk::render_chat(broken, kOneTurn, {}), Contains("line 2"));
  const ChatTemplate gemma = own(
      "{% if messages[0]['role'] == 'system' %}\n{{ raise_exception('System role not supported') }}\n{% endif %}"
      "{% for m in messages %}{{ m.content }}{% endfor %}");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(gemma, kOneTurn, {})) == "Hi");
  CHECK_THROWS_WITH(kvdesk::render_chat(gemma, kWithSystem, {}), Contains("System role not supported") && Contains("line 2"));
}

TEST_CASE("The model's own template renders unless a family or a template file is chosen", "[engine][chat]") {
  CHECK(kvdesk::chat_template_names().front() == "plain");
  CHECK(kvdesk::chat_template_names().size() == 20);
  const kvdesk::test::TempDir dir;
  kvdesk::GgufWriter w;
  w.add_string("tokenizer.chat_template", "{% for m in messages %}User: {{ m['content'] }}\n{% endfor %}");
  w.write(dir.file("t.gguf"));
  const auto file = kvdesk::GgufFile::open(dir.file("t.gguf"));
  const ChatTemplate model_own = kvdesk::chat_template_for(*file, "");
  CHECK(model_own.name == "own");
  CHECK(model_own.warning.empty());
  CHECK(kvdesk::joined_text(kvdesk::render_chat(model_own, kOneTurn, {})) == "User: Hi\n");
  const ChatTemplate chosen = kvdesk::chat_template_for(*file, "gemma");
  CHECK(chosen.name == "gemma");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(chosen, kOneTurn, {})) == "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  const ChatTemplate from_file = kvdesk::chat_template_for(*file, "mine.jinja", "{{ messages | length }}");
  CHECK(from_file.name == "file mine.jinja");
  CHECK(kvdesk::joined_text(kvdesk::render_chat(from_file, kWithSystem, {})) == "4");
  CHECK(from_file.source_hash != model_own.source_hash);
  CHECK_THROWS_WITH(kvdesk::chat_template_for(*file, "vicuna"), Contains("'vicuna'") && Contains("chatml"));
  // Without a template: plain.
  kvdesk::GgufWriter bare;
  bare.add_string("general.name", "x");
  bare.write(dir.file("bare.gguf"));
  CHECK(kvdesk::chat_template_for(*kvdesk::GgufFile::open(dir.file("bare.gguf")), "").name == "plain");
}

TEST_CASE("On stories260K (SentencePiece) Plain encodes exactly like encode(), Llama 2 parses only template specials", "[engine][chat]") {
  const auto file = kvdesk::GgufFile::open(kvdesk::test::model_path("stories260K.gguf"));
  const auto tok = kvdesk::Tokenizer::from_gguf(*file);
  const std::vector<ChatMessage> story = {{"user", "Once upon a time"}, {"assistant", " there was"}, {"user", "a cat"}};
  CHECK(kvdesk::encode_chat(*tok, family("plain"), story) ==
        tok->encode("Once upon a time there was\na cat", tok->add_bos_default()));
  // Llama 2: the template's <s> and </s> are BOS (1) and EOS (2), written once each here;
  // the typed "</s>" is text.
  const std::vector<int32_t> ids =
      kvdesk::encode_chat(*tok, family("llama2"), {{"user", "hi </s>"}, {"assistant", "ok"}, {"user", "go"}});
  CHECK(ids.front() == tok->bos_id());
  CHECK(std::count(ids.begin(), ids.end(), tok->bos_id()) == 2);
  CHECK(std::count(ids.begin(), ids.end(), tok->eos_id()) == 1);
}

TEST_CASE("Stored ids stand in for an answer the template pads, and a run ends before an answer it drops thinking from", "[engine][chat]") {
  const auto file = kvdesk::GgufFile::open(kvdesk::test::model_path("stories260K.gguf"));
  const auto tok = kvdesk::Tokenizer::from_gguf(*file);
  const std::string identity = "model 1; template test";
  const auto starts_with = [](const std::vector<int32_t>& ids, const std::vector<int32_t>& head) {
    return ids.size() >= head.size() && std::equal(head.begin(), head.end(), ids.begin());
  };

  SECTION("Mistral writes ' ' + content, so an answer that starts with a space is padded twice") {
    const ChatTemplate mistral = family("mistral");
    const std::vector<int32_t> user = kvdesk::encode_chat_prompt(*tok, mistral, {{"user", "Once upon a time"}}, {}, identity).spans[0];
    const std::vector<int32_t> answer = tok->encode(" there was a cat.", false);
    const kvdesk::ChatPrompt next = kvdesk::encode_chat_prompt(
        *tok, mistral, {{"user", "Once upon a time"}, {"assistant", " there was a cat."}, {"user", "a dog"}},
        {{identity, user}, {identity, answer}, {}}, identity);
    CHECK(next.reused_messages == 2);
    std::vector<int32_t> history = user;
    history.insert(history.end(), answer.begin(), answer.end());
    CHECK(starts_with(next.tokens, history));
    CHECK(next.tokens.size() == history.size() + next.spans[2].size());
  }
  SECTION("Qwen3 drops an earlier answer's thinking: the user message before it still comes from its ids") {
    const ChatTemplate qwen3 = family("qwen3");
    const std::vector<int32_t> user = kvdesk::encode_chat_prompt(*tok, qwen3, {{"user", "Once upon a time"}}, {}, identity).spans[0];
    const std::string thought = "<think>\nA story.\n</think>\n\nThere was a cat.";
    const kvdesk::ChatPrompt next = kvdesk::encode_chat_prompt(
        *tok, qwen3, {{"user", "Once upon a time"}, {"assistant", thought}, {"user", "a dog"}},
        {{identity, user}, {identity, tok->encode(thought, false)}, {}}, identity);
    CHECK(next.reused_messages == 1);
    CHECK(starts_with(next.tokens, user));
  }
}

TEST_CASE("A dated template's stored ids keep the day they were rendered for, text shows the day asked for", "[engine][chat]") {
  const auto file = kvdesk::GgufFile::open(kvdesk::test::model_path("stories260K.gguf"));
  const auto tok = kvdesk::Tokenizer::from_gguf(*file);
  const std::string identity = "model 1; template llama3";
  const ChatTemplate llama32 = own(kvdesk::test::kLlama32Template);
  const std::vector<ChatMessage> first_turn = {{"user", "Once upon a time"}};
  const std::vector<int32_t> user =
      kvdesk::encode_chat_prompt(*tok, llama32, first_turn, {}, identity, false, april_5_2025()).spans[0];
  REQUIRE_FALSE(user.empty());
  const std::vector<ChatMessage> next_turn = {{"user", "Once upon a time"}, {"assistant", "there was a cat."}, {"user", "a dog"}};
  const std::vector<kvdesk::MessageTokens> stored = {{identity, user}, {identity, tok->encode("there was a cat.", false)}, {}};
  std::tm next_day = april_5_2025();
  next_day.tm_mday = 6;

  // The first span holds the system turn as it was rendered, so the KV it computed stays valid.
  const kvdesk::ChatPrompt later = kvdesk::encode_chat_prompt(*tok, llama32, next_turn, stored, identity, false, next_day);
  CHECK(later.reused_messages == 2);
  CHECK(std::equal(user.begin(), user.end(), later.tokens.begin()));
  // Without ids the date is the one asked for.
  const std::vector<int32_t> on_april_5 = kvdesk::encode_chat(*tok, llama32, next_turn, april_5_2025());
  CHECK(kvdesk::encode_chat_prompt(*tok, llama32, next_turn, {}, identity, false, april_5_2025()).tokens == on_april_5);
  CHECK(kvdesk::encode_chat_prompt(*tok, llama32, next_turn, {}, identity, false, next_day).tokens != on_april_5);
}
