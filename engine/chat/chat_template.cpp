// render_chat: one small function per template family. Each follows one reference template
// (named above it) statement by statement: what the template writes itself goes into
// template segments, message contents into content segments.
#include "engine/chat/chat_template.h"

#include <algorithm>
#include <array>

#include "engine/chat/answer_parts.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"

namespace kvdesk {
namespace {

constexpr std::array<ChatFormat, 20> kAllFormats = {
    ChatFormat::Plain,   ChatFormat::ChatML,    ChatFormat::Llama2,   ChatFormat::Llama3,     ChatFormat::Zephyr,
    ChatFormat::Mistral, ChatFormat::Gemma,     ChatFormat::Phi3,     ChatFormat::Qwen3,      ChatFormat::Phi4,
    ChatFormat::Granite, ChatFormat::MistralV7, ChatFormat::DeepSeek, ChatFormat::DeepSeekR1, ChatFormat::Phi4Mini,
    ChatFormat::MistralTekken, ChatFormat::Qwen3Thinking, ChatFormat::Harmony, ChatFormat::MistralV1,
    ChatFormat::MistralV1Unspaced};

void check_roles(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw Error("a chat request needs at least one message");
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      throw Error("unknown chat role '" + m.role + "' (use system, user or assistant)");
    }
  }
}

// What Jinja's trim and Python's str.strip() take off.
constexpr std::string_view kWhitespace = " \t\n\r\f\v";

// Jinja's trim filter and Python's str.strip(): whitespace off both ends.
std::string trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return std::string(s.substr(begin, s.find_last_not_of(kWhitespace) - begin + 1));
}

std::string trim_end(std::string_view s) {
  const size_t end = s.find_last_not_of(kWhitespace);
  return end == std::string_view::npos ? std::string() : std::string(s.substr(0, end + 1));
}

// Collects segments, joining neighbours of the same kind.
class Prompt {
 public:
  Prompt& tmpl(std::string_view text) { return add(text, true); }
  Prompt& content(std::string_view text) { return add(text, false); }
  std::vector<TextSegment> take() { return std::move(segments_); }

 private:
  Prompt& add(std::string_view text, bool parse_special) {
    if (text.empty()) return *this;
    if (segments_.empty() || segments_.back().parse_special != parse_special) segments_.push_back({"", parse_special});
    segments_.back().text += text;
    return *this;
  }
  std::vector<TextSegment> segments_;
};

// The system message's content when the conversation starts with one, and the rest.
struct SplitSystem {
  const ChatMessage* system = nullptr;
  std::vector<ChatMessage> rest;
};

SplitSystem split_system(const std::vector<ChatMessage>& messages) {
  SplitSystem out;
  const bool has_system = messages.front().role == "system";
  if (has_system) out.system = &messages.front();
  out.rest.assign(messages.begin() + (has_system ? 1 : 0), messages.end());
  return out;
}

// Plain: messages joined by newlines, except that an assistant message continues the text
// before it directly (the model's answer was a continuation of it).
std::vector<TextSegment> render_plain(const std::vector<ChatMessage>& messages) {
  Prompt p;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i > 0 && messages[i].role != "assistant") p.tmpl("\n");
    p.content(messages[i].content);
  }
  return p.take();
}

// ChatML as Qwen2/Qwen2.5 write it:
//   {{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}
//   ... {{ '<|im_start|>assistant\n' }}
// preceded by '<|im_start|>system\n<default><|im_end|>\n' when the template has a default
// system prompt and the conversation brings none.
std::vector<TextSegment> render_chatml(const std::vector<ChatMessage>& messages, const std::string& default_system) {
  Prompt p;
  if (!default_system.empty() && messages.front().role != "system") {
    p.tmpl("<|im_start|>system\n" + default_system + "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) p.tmpl("<|im_start|>" + m.role + "\n").content(m.content).tmpl("<|im_end|>\n");
  return p.tmpl("<|im_start|>assistant\n").take();
}

// Meta-Llama-3-8B-Instruct:
//   {% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'
//      + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}
//   {% set content = bos_token + content %}{% endif %}{{ content }} ...
//   {{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
// Llama 3.1 / 3.2 (no tools) first write a system turn whatever the messages are:
//   {{- bos_token }} ... {%- set system_message = messages[0]['content']|trim %} ...
//   {{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
//   {{- "Cutting Knowledge Date: December 2023\n" }}{{- "Today Date: " + date_string + "\n\n" }}
//   {{- system_message }}{{- "<|eot_id|>" }}
// and then the other messages as Llama 3.0 does.
std::vector<TextSegment> render_llama3(const std::vector<ChatMessage>& all, const std::string& system_preamble,
                                       const ChatSpecialTexts& specials) {
  Prompt p;
  p.tmpl(specials.bos);
  std::vector<ChatMessage> messages = all;
  if (!system_preamble.empty()) {
    const SplitSystem split = split_system(all);
    p.tmpl("<|start_header_id|>system<|end_header_id|>\n\n" + system_preamble);
    if (split.system) p.content(trim(split.system->content));
    p.tmpl("<|eot_id|>");
    messages = split.rest;
  }
  for (const ChatMessage& m : messages) {
    p.tmpl("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n").content(trim(m.content)).tmpl("<|eot_id|>");
  }
  return p.tmpl("<|start_header_id|>assistant<|end_header_id|>\n\n").take();
}

// HuggingFaceH4/zephyr-7b-beta and TinyLlama-1.1B-Chat-v1.0 (trim_blocks drops the newline
// after each {% %} tag, not after {{ }}):
//   {{ '<|user|>\n' + message['content'] + eos_token }}\n ... {{ '<|assistant|>' }}\n
std::vector<TextSegment> render_zephyr(const std::vector<ChatMessage>& messages, const ChatSpecialTexts& specials) {
  Prompt p;
  for (const ChatMessage& m : messages) p.tmpl("<|" + m.role + "|>\n").content(m.content).tmpl(specials.eos + "\n");
  return p.tmpl("<|assistant|>\n").take();
}

// Llama-2-7b-chat-hf: the system prompt goes into the first user message,
//   content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'];
//   user:      {{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}
//   assistant: {{ ' ' + content.strip() + ' ' + eos_token }}
std::vector<TextSegment> render_llama2(const std::vector<ChatMessage>& messages, const ChatSpecialTexts& specials) {
  const SplitSystem split = split_system(messages);
  Prompt p;
  for (size_t i = 0; i < split.rest.size(); ++i) {
    const ChatMessage& m = split.rest[i];
    if (m.role == "user") {
      p.tmpl(specials.bos + "[INST] ");
      if (i == 0 && split.system) {
        // strip() sees "<<SYS>>..." at the start, so only the user text's end is stripped.
        p.tmpl("<<SYS>>\n").content(split.system->content).tmpl("\n<</SYS>>\n\n").content(trim_end(m.content));
      } else {
        p.content(trim(m.content));
      }
      p.tmpl(" [/INST]");
    } else if (m.role == "assistant") {
      p.tmpl(" ").content(trim(m.content)).tmpl(" " + specials.eos);
    }
  }
  return p.take();
}

// The [INST] families: each user message between `open` and `close` (the system prompt, and
// "\n\n", before the last user message or the first), each answer after `answer_lead`, then EOS.
struct InstForm {
  std::string open;
  std::string close;
  std::string answer_lead;
  bool system_in_first = false;   // else in the last user message of all
};

std::vector<TextSegment> render_inst(const std::vector<ChatMessage>& messages, const InstForm& form,
                                     const ChatSpecialTexts& specials) {
  const SplitSystem split = split_system(messages);
  Prompt p;
  p.tmpl(specials.bos);
  for (size_t i = 0; i < split.rest.size(); ++i) {
    const ChatMessage& m = split.rest[i];
    if (m.role == "user") {
      p.tmpl(form.open);
      const bool system_here = form.system_in_first ? i == 0 : i + 1 == split.rest.size();
      if (system_here && split.system) p.content(split.system->content).tmpl("\n\n");
      p.content(m.content).tmpl(form.close);
    } else if (m.role == "assistant") {
      p.tmpl(form.answer_lead).content(m.content).tmpl(specials.eos);
    }
  }
  return p.take();
}

// Mistral-7B-Instruct-v0.3: the system prompt goes before the user message that is the last
// message of all (loop.last), or nowhere:
//   {{- bos_token }} user: {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
//   or {{- "[INST] " + message["content"] + "[/INST]" }}
//   assistant: {{- " " + message["content"] + eos_token }}
// Mistral-Nemo-Instruct-2407 (tekken) writes the same without the two spaces:
//   {{- "[INST]" + message["content"] + "[/INST]" }} ... {{- message["content"] + eos_token }}
std::vector<TextSegment> render_mistral(const std::vector<ChatMessage>& messages, bool tekken,
                                        const ChatSpecialTexts& specials) {
  const std::string space = tekken ? "" : " ";
  return render_inst(messages, {"[INST]" + space, "[/INST]", space, false}, specials);
}

// Mistral-7B-Instruct-v0.2 and Mixtral-8x7B-Instruct-v0.1 (Mistral's v1 tokenization): the
// system prompt starts the first user turn,
//   {{- bos_token }} user: {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
//   (loop.first) or {{- ' [INST] ' + message['content'] + ' [/INST]' }}
//   assistant: {{- ' ' + message['content'] + eos_token}}
// Their first template, which older GGUFs carry, writes no leading spaces and refuses a system
// message (merged the same way here):
//   {{ bos_token }} user: {{ '[INST] ' + message['content'] + ' [/INST]' }}
//   assistant: {{ message['content'] + eos_token}}
std::vector<TextSegment> render_mistral_v1(const std::vector<ChatMessage>& messages, bool leading_spaces,
                                           const ChatSpecialTexts& specials) {
  const std::string lead = leading_spaces ? " " : "";
  return render_inst(messages, {lead + "[INST] ", " [/INST]", lead, true}, specials);
}

// gemma-3-it: the system prompt starts the first turn,
//   {{ bos_token }} first_user_prefix = messages[0]['content'] + '\n\n'
//   {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
//   {{ message['content'] | trim }}{{ '<end_of_turn>\n' }} ... {{'<start_of_turn>model\n'}}
// with role "model" for the assistant. (Gemma 1 and 2 refuse a system message; this is
// what llama.cpp does for them too.)
std::vector<TextSegment> render_gemma(const std::vector<ChatMessage>& messages, const ChatSpecialTexts& specials) {
  const SplitSystem split = split_system(messages);
  Prompt p;
  p.tmpl(specials.bos);
  for (size_t i = 0; i < split.rest.size(); ++i) {
    const ChatMessage& m = split.rest[i];
    p.tmpl("<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n");
    if (i == 0 && split.system) p.content(split.system->content).tmpl("\n\n");
    p.content(trim(m.content)).tmpl("<end_of_turn>\n");
  }
  return p.tmpl("<start_of_turn>model\n").take();
}

// Phi-3-mini-4k-instruct:
//   {{'<|' + role + '|>\n' + message['content'] + '<|end|>\n'}} ... {{ '<|assistant|>\n' }}
std::vector<TextSegment> render_phi3(const std::vector<ChatMessage>& messages) {
  Prompt p;
  for (const ChatMessage& m : messages) p.tmpl("<|" + m.role + "|>\n").content(m.content).tmpl("<|end|>\n");
  return p.tmpl("<|assistant|>\n").take();
}

// Phi-4-mini-instruct (no tools): Phi-3's tags without the line breaks,
//   {{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }} ... {{ '<|assistant|>' }}
std::vector<TextSegment> render_phi4_mini(const std::vector<ChatMessage>& messages) {
  Prompt p;
  for (const ChatMessage& m : messages) p.tmpl("<|" + m.role + "|>").content(m.content).tmpl("<|end|>");
  return p.tmpl("<|assistant|>").take();
}

// Qwen3 (no tools): ChatML, where an assistant turn before the last user message keeps only
// its answer (the thinking of earlier turns is dropped):
//   {%- if '</think>' in content %}
//     {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
//     {%- set content = content.split('</think>')[-1].lstrip('\n') %}
//   {%- if loop.index0 > ns.last_query_index %}{%- if loop.last or reasoning_content %}
//     {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
//   ... {{- '<|im_start|>' + message.role + '\n' + content }} ... {{- '<|im_end|>\n' }}
// with the system message first as ChatML writes it, and '<|im_start|>assistant\n' to end; the
// thinking models (Qwen3-*-Thinking-2507, QwQ) end with '<|im_start|>assistant\n<think>\n', the
// answer opened.
struct ThinkSplit {
  std::string reasoning;
  std::string answer;
};

std::string strip_newlines(std::string_view s, bool front, bool back) {
  size_t begin = 0, end = s.size();
  while (front && begin < end && s[begin] == '\n') ++begin;
  while (back && end > begin && s[end - 1] == '\n') --end;
  return std::string(s.substr(begin, end - begin));
}

// reasoning: after the last <think> of the text before the first </think>; answer: after the
// last </think>. Without </think> all of it is the answer.
ThinkSplit split_thinking(std::string_view content) {
  constexpr std::string_view kOpen = "<think>", kClose = "</think>";
  const size_t close = content.find(kClose);
  if (close == std::string_view::npos) return {"", std::string(content)};
  const std::string before = strip_newlines(content.substr(0, close), false, true);
  const size_t open = before.rfind(kOpen);
  const std::string reasoning = open == std::string::npos ? before : before.substr(open + kOpen.size());
  const size_t last_close = content.rfind(kClose);
  return {strip_newlines(reasoning, true, false), strip_newlines(content.substr(last_close + kClose.size()), true, false)};
}

std::vector<TextSegment> render_qwen3(const std::vector<ChatMessage>& messages, bool think_opener) {
  size_t last_user = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "user") last_user = i;
  }
  Prompt p;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "assistant") {
      p.tmpl("<|im_start|>" + m.role + "\n").content(m.content).tmpl("<|im_end|>\n");
      continue;
    }
    const ThinkSplit split = split_thinking(m.content);
    p.tmpl("<|im_start|>assistant\n");
    if (i > last_user && (i + 1 == messages.size() || !split.reasoning.empty())) {
      p.tmpl("<think>\n").content(strip_newlines(split.reasoning, true, true)).tmpl("\n</think>\n\n");
      p.content(strip_newlines(split.answer, true, false));
    } else {
      p.content(split.answer);
    }
    p.tmpl("<|im_end|>\n");
  }
  return p.tmpl(think_opener ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n").take();
}

// phi-4: ChatML with <|im_sep|> after the role and no newlines:
//   {{'<|im_start|>' + role + '<|im_sep|>' + message['content'] + '<|im_end|>'}} ...
//   {{ '<|im_start|>assistant<|im_sep|>' }}
std::vector<TextSegment> render_phi4(const std::vector<ChatMessage>& messages) {
  Prompt p;
  for (const ChatMessage& m : messages) p.tmpl("<|im_start|>" + m.role + "<|im_sep|>").content(m.content).tmpl("<|im_end|>");
  return p.tmpl("<|im_start|>assistant<|im_sep|>").take();
}

// granite-3.x-instruct (no tools or documents): the system message, the template's default
// one when the conversation has none, then every other message,
//   {{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>\n' }}
//   {{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}
//   ... {{- '<|start_of_role|>assistant<|end_of_role|>' }}
std::vector<TextSegment> render_granite(const std::vector<ChatMessage>& messages, const std::string& default_system) {
  Prompt p;
  if (!default_system.empty() && messages.front().role != "system") {
    p.tmpl("<|start_of_role|>system<|end_of_role|>" + default_system + "<|end_of_text|>\n");
  }
  for (const ChatMessage& m : messages) {
    p.tmpl("<|start_of_role|>" + m.role + "<|end_of_role|>").content(m.content).tmpl("<|end_of_text|>\n");
  }
  return p.tmpl("<|start_of_role|>assistant<|end_of_role|>").take();
}

// Mistral v7 / tekken (Mistral-Small-24B-Instruct-2501), where system_message is the
// template's default_system_message when the conversation does not start with a system message:
//   {{- bos_token }} {{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}
//   user: {{- '[INST]' + message['content'] + '[/INST]' }}
//   system: {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
//   assistant: {{- message['content'] + eos_token }}
std::vector<TextSegment> render_mistral_v7(const std::vector<ChatMessage>& messages, const std::string& default_system,
                                           const ChatSpecialTexts& specials) {
  Prompt p;
  p.tmpl(specials.bos);
  if (!default_system.empty() && messages.front().role != "system") {
    p.tmpl("[SYSTEM_PROMPT]" + default_system + "[/SYSTEM_PROMPT]");
  }
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      p.tmpl("[SYSTEM_PROMPT]").content(m.content).tmpl("[/SYSTEM_PROMPT]");
    } else if (m.role == "user") {
      p.tmpl("[INST]").content(m.content).tmpl("[/INST]");
    } else {
      p.content(m.content).tmpl(specials.eos);
    }
  }
  return p.take();
}

// DeepSeek-R1-Distill-Qwen / -Llama (no tools): the last system message's content right after
// BOS, then the turns; an answer keeps only what follows its last </think>:
//   {{bos_token}}{{ns.system_prompt}} user: {{'<｜User｜>' + message['content']}}
//   assistant: {% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}
//              {% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}
//   {% if add_generation_prompt %}{{'<｜Assistant｜><think>\n'}}{% endif %}
// The DeepSeek form (V3, R1-0528, the distills' first template) ends with '<｜Assistant｜>' alone;
// R1-0528 writes that tag after each user message instead of before each answer, the same text.
std::vector<TextSegment> render_deepseek(const std::vector<ChatMessage>& messages, bool think_opener,
                                         const ChatSpecialTexts& specials) {
  constexpr std::string_view kThinkEnd = "</think>";
  Prompt p;
  p.tmpl(specials.bos);
  const auto last_system =
      std::find_if(messages.rbegin(), messages.rend(), [](const ChatMessage& m) { return m.role == "system"; });
  if (last_system != messages.rend()) p.content(last_system->content);
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      p.tmpl("<｜User｜>").content(m.content);
    } else if (m.role == "assistant") {
      const size_t think_end = m.content.rfind(kThinkEnd);
      const std::string_view answer = think_end == std::string::npos
                                          ? std::string_view(m.content)
                                          : std::string_view(m.content).substr(think_end + kThinkEnd.size());
      p.tmpl("<｜Assistant｜>").content(answer).tmpl("<｜end▁of▁sentence｜>");
    }
  }
  return p.tmpl(think_opener ? "<｜Assistant｜><think>\n" : "<｜Assistant｜>").take();
}

// gpt-oss's harmony template (no tools, no reasoning_effort or model_identity passed): its own
// system message first, then the conversation's first system message as the developer's
// instructions, users and answers as messages; an answer keeps only its final channel (the
// reasoning of earlier turns is dropped: an answer as the model wrote it, or with its reasoning
// in <think> as a remote server's reasoning_content arrives, split_answer), and later system
// messages are not rendered:
//   {{- "<|start|>system<|message|>" }}{{- build_system_message() }}{{- "<|end|>" }}
//   {{- "<|start|>developer<|message|>" }}{{- "# Instructions\n\n" }}{{- developer_message }}
//   {{- "\n\n" }}{{- "<|end|>" }}
//   user: {{- "<|start|>user<|message|>" + message.content + "<|end|>" }}
//   assistant: {{- "<|start|>assistant<|channel|>final<|message|>" + message.content + "<|end|>" }}
//   <|start|>assistant
std::vector<TextSegment> render_harmony(const std::vector<ChatMessage>& messages, const std::string& system_message) {
  Prompt p;
  p.tmpl("<|start|>system<|message|>" + system_message + "<|end|>");
  const SplitSystem split = split_system(messages);
  if (split.system && !split.system->content.empty()) {
    p.tmpl("<|start|>developer<|message|># Instructions\n\n").content(split.system->content).tmpl("\n\n<|end|>");
  }
  for (const ChatMessage& m : split.rest) {
    if (m.role == "user") p.tmpl("<|start|>user<|message|>").content(m.content).tmpl("<|end|>");
    if (m.role == "assistant") {
      p.tmpl("<|start|>assistant<|channel|>final<|message|>").content(split_answer(m.content).answer).tmpl("<|end|>");
    }
  }
  return p.tmpl("<|start|>assistant").take();
}

// build_system_message() without tools: the identity, the knowledge cutoff, today's date
// (strftime_now("%Y-%m-%d")), the default reasoning effort and the channels.
DatedText harmony_system_message() {
  DatedText out = DatedText::literal(
      "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ");
  out.parts.push_back({"%Y-%m-%d", true});
  out.append(DatedText::literal(
      "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
      "message."));
  return out;
}

// The literal system prompt a ChatML template writes when the conversation has none: the
// text between "<|im_start|>system\n" (the \n as written in the Jinja source) and
// "<|im_end|>" in a string literal, i.e. with no quote or expression in between.
std::string chatml_default_system(std::string_view text) {
  constexpr std::string_view kOpen = "<|im_start|>system\\n";
  constexpr std::string_view kClose = "<|im_end|>";
  for (size_t at = text.find(kOpen); at != std::string_view::npos; at = text.find(kOpen, at + 1)) {
    const size_t begin = at + kOpen.size();
    const size_t end = text.find(kClose, begin);
    if (end == std::string_view::npos) break;
    const std::string_view literal = text.substr(begin, end - begin);
    if (!literal.empty() && literal.find_first_of("'\"{}+") == std::string_view::npos) return std::string(literal);
  }
  return {};
}

// Llama 3.1+: "Cutting Knowledge Date: December 2023\nToday Date: <date_string>\n\n" with the
// date_string the template sets (jinja_assigned_value), "26 Jul 2024" if it sets none it can be
// read from; empty for a template without the preamble (Llama 3.0).
DatedText llama3_system_preamble(std::string_view text) {
  constexpr std::string_view kKnowledge = "Cutting Knowledge Date: December 2023";
  if (text.find(kKnowledge) == std::string_view::npos) return {};
  DatedText out = DatedText::literal(std::string(kKnowledge) + "\nToday Date: ");
  out.append(jinja_assigned_value(text, "date_string").value_or(DatedText::literal("26 Jul 2024")));
  out.append(DatedText::literal("\n\n"));
  return out;
}

// Granite and Mistral v7: the family with the default system message its template computes;
// a warning instead when the template computes it in a way kvdesk cannot follow.
ChatTemplate with_jinja_default_system(ChatFormat format, std::string_view text) {
  JinjaDefaultSystem found = jinja_default_system(text);
  ChatTemplate out{format, std::move(found.text), {}, ""};
  if (!found.unreadable.empty()) {
    out.warning = "the model's chat template computes its default system message in a way kvdesk cannot follow (" +
                  found.unreadable +
                  "); conversations without a system message go without it (add one to match the model's own "
                  "prompt)";
  }
  return out;
}

}  // namespace

const char* chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::Plain: return "plain";
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama2: return "llama2";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Zephyr: return "zephyr";
    case ChatFormat::Mistral: return "mistral";
    case ChatFormat::Gemma: return "gemma";
    case ChatFormat::Phi3: return "phi3";
    case ChatFormat::Qwen3: return "qwen3";
    case ChatFormat::Phi4: return "phi4";
    case ChatFormat::Granite: return "granite";
    case ChatFormat::MistralV7: return "mistral-v7";
    case ChatFormat::DeepSeek: return "deepseek";
    case ChatFormat::DeepSeekR1: return "deepseek-r1";
    case ChatFormat::Phi4Mini: return "phi4-mini";
    case ChatFormat::MistralTekken: return "mistral-tekken";
    case ChatFormat::Qwen3Thinking: return "qwen3-thinking";
    case ChatFormat::Harmony: return "harmony";
    case ChatFormat::MistralV1: return "mistral-v1";
    case ChatFormat::MistralV1Unspaced: return "mistral-v1-unspaced";
  }
  return "?";
}

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  for (const ChatFormat f : kAllFormats) {
    if (name == chat_format_name(f)) return f;
  }
  return std::nullopt;
}

bool generation_prompt_opens_reasoning(ChatFormat format) {
  return format == ChatFormat::DeepSeekR1 || format == ChatFormat::Qwen3Thinking;
}

std::vector<std::string> chat_format_names() {
  std::vector<std::string> out;
  for (const ChatFormat f : kAllFormats) out.emplace_back(chat_format_name(f));
  return out;
}

ChatTemplate detect_chat_template(std::string_view t) {
  const auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|im_sep|>")) return {ChatFormat::Phi4, {}, {}, ""};
  if (has("<|start|>") && has("<|channel|>")) return {ChatFormat::Harmony, harmony_system_message(), {}, ""};
  if (has("<｜User｜>") && has("<｜Assistant｜>")) {
    const bool think_opener = has("<｜Assistant｜><think>\\n") || has("<｜Assistant｜><think>\n");
    return {think_opener ? ChatFormat::DeepSeekR1 : ChatFormat::DeepSeek, {}, {}, ""};
  }
  if (has("<|im_start|>") && has("<think>")) {
    // An opener a template writes only when asked to think (enable_thinking) is not written.
    const bool think_opener = has("'<|im_start|>assistant\\n<think>\\n'") && !has("enable_thinking");
    return {think_opener ? ChatFormat::Qwen3Thinking : ChatFormat::Qwen3, {}, {}, ""};
  }
  if (has("<|im_start|>")) return {ChatFormat::ChatML, DatedText::literal(chatml_default_system(t)), {}, ""};
  if (has("<|start_of_role|>")) return with_jinja_default_system(ChatFormat::Granite, t);
  if (has("[SYSTEM_PROMPT]")) return with_jinja_default_system(ChatFormat::MistralV7, t);
  if (has("<|start_header_id|>")) return {ChatFormat::Llama3, {}, llama3_system_preamble(t), ""};
  if (has("<start_of_turn>")) return {ChatFormat::Gemma, {}, {}, ""};
  if (has("'<|' + message['role'] + '|>' + message['content']") && has("<|end|>")) {
    return {ChatFormat::Phi4Mini, {}, {}, ""};
  }
  if (has("<|user|>")) return {has("<|end|>") ? ChatFormat::Phi3 : ChatFormat::Zephyr, {}, {}, ""};
  if (has("[INST]") && has("<<SYS>>")) return {ChatFormat::Llama2, {}, {}, ""};
  if (has("\"[INST]\" +") || has("'[INST]' +")) return {ChatFormat::MistralTekken, {}, {}, ""};
  if (has("' [INST] '")) return {ChatFormat::MistralV1, {}, {}, ""};
  if (has("' [/INST]'")) return {ChatFormat::MistralV1Unspaced, {}, {}, ""};
  if (has("[INST]")) return {ChatFormat::Mistral, {}, {}, ""};
  return {ChatFormat::ChatML, {}, {},
          "the model's chat template (tokenizer.chat_template) is not one kvdesk knows; using ChatML, which may "
          "not be what this model was trained on (choose another with the chat template setting)"};
}

ChatTemplate chat_template_for(const GgufFile& file, std::string_view override_name) {
  const std::optional<std::string> text = file.find_string("tokenizer.chat_template");
  ChatTemplate detected = text ? detect_chat_template(*text) : ChatTemplate{};
  if (override_name.empty()) return detected;
  const std::optional<ChatFormat> format = chat_format_from_name(override_name);
  if (!format) {
    std::string names;
    for (const std::string& name : chat_format_names()) names += (names.empty() ? "" : ", ") + name;
    throw Error("unknown chat template '" + std::string(override_name) + "' (use one of " + names + ")");
  }
  // The model's default system prompt and preamble belong to its own family only; harmony's
  // system message is the format's own.
  if (*format == detected.format) return {*format, detected.default_system, detected.system_preamble, ""};
  if (*format == ChatFormat::Harmony) return {*format, harmony_system_message(), {}, ""};
  return {*format, {}, {}, ""};
}

std::vector<TextSegment> render_chat(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                     const ChatSpecialTexts& specials, const std::tm& now) {
  check_roles(messages);
  const std::string default_system = chat_template.default_system.format(now);
  switch (chat_template.format) {
    case ChatFormat::Plain: return render_plain(messages);
    case ChatFormat::ChatML: return render_chatml(messages, default_system);
    case ChatFormat::Llama2: return render_llama2(messages, specials);
    case ChatFormat::Llama3: return render_llama3(messages, chat_template.system_preamble.format(now), specials);
    case ChatFormat::Zephyr: return render_zephyr(messages, specials);
    case ChatFormat::Mistral: return render_mistral(messages, false, specials);
    case ChatFormat::MistralTekken: return render_mistral(messages, true, specials);
    case ChatFormat::Gemma: return render_gemma(messages, specials);
    case ChatFormat::Phi3: return render_phi3(messages);
    case ChatFormat::Qwen3: return render_qwen3(messages, false);
    case ChatFormat::Qwen3Thinking: return render_qwen3(messages, true);
    case ChatFormat::Phi4: return render_phi4(messages);
    case ChatFormat::Granite: return render_granite(messages, default_system);
    case ChatFormat::MistralV7: return render_mistral_v7(messages, default_system, specials);
    case ChatFormat::DeepSeek: return render_deepseek(messages, false, specials);
    case ChatFormat::DeepSeekR1: return render_deepseek(messages, true, specials);
    case ChatFormat::Phi4Mini: return render_phi4_mini(messages);
    case ChatFormat::Harmony: return render_harmony(messages, default_system);
    case ChatFormat::MistralV1: return render_mistral_v1(messages, true, specials);
    case ChatFormat::MistralV1Unspaced: return render_mistral_v1(messages, false, specials);
  }
  return render_plain(messages);
}

std::string joined_text(const std::vector<TextSegment>& segments) {
  std::string out;
  for (const TextSegment& s : segments) out += s.text;
  return out;
}

namespace {

constexpr size_t kNoEnd = std::string::npos;

ChatSpecialTexts special_texts(const Tokenizer& tokenizer) {
  return {tokenizer.piece(tokenizer.bos_id()), tokenizer.piece(tokenizer.eos_id())};
}

// BOS goes first unless the vocabulary does not ask for it or the template already wrote it.
bool needs_bos(const Tokenizer& tokenizer, const ChatSpecialTexts& specials, const std::vector<TextSegment>& prompt) {
  const bool template_wrote_bos = !specials.bos.empty() && !prompt.empty() && prompt.front().parse_special &&
                                  prompt.front().text.starts_with(specials.bos);
  return tokenizer.add_bos_default() && !template_wrote_bos;
}

// Where an answer's content ends in `full` when its rendering starts at `at`: after the content
// as it is when the template writes it so; else, for templates that pad an answer (" " +
// content) or trim it (Llama 2, Mistral, Llama 3, Gemma), after the content's text without its
// outer whitespace, found past any whitespace at `at`. kNoEnd when neither follows (a template
// that drops old thinking).
size_t answer_end(const std::string& full, size_t at, const std::string& content) {
  if (full.compare(at, content.size(), content) == 0) return at + content.size();
  const std::string core = trim(content);
  const size_t begin = std::min(full.find_first_not_of(kWhitespace, at), full.size());
  return full.compare(begin, core.size(), core) == 0 ? begin + core.size() : kNoEnd;
}

// Where message i's part of the conversation ends in `full`, the whole conversation's text:
// after the generation prompt that follows a user or system message, after an answer's own
// text (answer_end). kNoEnd when the template does not render the conversation up to there as
// a prefix of full (a template that moves the system prompt or drops old thinking).
size_t message_end(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages, size_t i,
                   const ChatSpecialTexts& specials, const std::tm& now, const std::string& full) {
  const bool answer = messages[i].role == "assistant";
  if (answer && i == 0) return kNoEnd;
  const std::vector<ChatMessage> head_messages(messages.begin(), messages.begin() + ptrdiff_t(answer ? i : i + 1));
  const std::string head = joined_text(render_chat(chat_template, head_messages, specials, now));
  if (!full.starts_with(head)) return kNoEnd;
  return answer ? answer_end(full, head.size(), messages[i].content) : head.size();
}

// The conversation up to the end of its last message, an answer left open for the model to carry
// on: the messages before it as the template renders them (ending with the generation prompt),
// then the answer's text. This is where message_end puts the end of an answer.
std::vector<TextSegment> render_open_answer(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                            const ChatSpecialTexts& specials, const std::tm& now) {
  if (messages.size() < 2 || messages.back().role != "assistant") {
    throw Error("only an answer that follows another message can be continued");
  }
  std::vector<TextSegment> out =
      render_chat(chat_template, std::vector<ChatMessage>(messages.begin(), messages.end() - 1), specials, now);
  out.push_back({messages.back().content, false});
  return out;
}

// The text of segments from offset begin to end, each piece keeping its segment's kind.
std::vector<TextSegment> slice(const std::vector<TextSegment>& segments, size_t begin, size_t end) {
  std::vector<TextSegment> out;
  size_t at = 0;
  for (const TextSegment& s : segments) {
    const size_t from = std::max(begin, at);
    const size_t to = std::min(end, at + s.text.size());
    if (from < to) out.push_back({s.text.substr(from - at, to - from), s.parse_special});
    at += s.text.size();
  }
  return out;
}

bool usable(const MessageTokens& stored, const std::string& identity, int32_t vocab_size) {
  if (stored.identity != identity || stored.ids.empty()) return false;
  return std::all_of(stored.ids.begin(), stored.ids.end(), [&](int32_t t) { return t >= 0 && t < vocab_size; });
}

// The leading messages taken from their stored ids, and where their text ends.
struct IdRun {
  size_t messages = 0;
  size_t text_end = 0;
};

IdRun reusable_run(const Tokenizer& tokenizer, const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                   const std::vector<MessageTokens>& stored, const std::string& identity,
                   const ChatSpecialTexts& specials, const std::tm& now, const std::string& full) {
  if (stored.size() != messages.size() || identity.empty()) return {};
  size_t count = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const bool system = messages[i].role == "system";
    if (system && i == 0) continue;
    if (system || !usable(stored[i], identity, tokenizer.vocab_size())) break;
    count = i + 1;
  }
  // The longest run the template renders as a prefix: one that drops old thinking or trims an
  // answer another way still keeps the messages before it.
  for (; count > 0 && messages[count - 1].role != "system"; --count) {
    const size_t end = message_end(chat_template, messages, count - 1, specials, now, full);
    if (end != kNoEnd) return {count, end};
  }
  return {};
}

// The spans of the messages after the run when the text part splits exactly at their ends:
// pieces encoded one by one must give the tokens the whole text part gave.
void attribute_text_part(ChatPrompt& out, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                         const std::vector<ChatMessage>& messages, const std::vector<TextSegment>& full,
                         const std::string& text, const std::tm& now, IdRun run, bool bos,
                         const std::vector<int32_t>& tail) {
  const ChatSpecialTexts specials = special_texts(tokenizer);
  std::vector<size_t> owners;
  for (size_t i = run.messages; i < messages.size(); ++i) {
    if (messages[i].role != "system") owners.push_back(i);
  }
  std::vector<std::vector<int32_t>> pieces;
  std::vector<int32_t> joined;
  size_t from = run.text_end;
  for (size_t i : owners) {
    const size_t to = message_end(chat_template, messages, i, specials, now, text);
    if (to == kNoEnd || to < from) return;
    pieces.push_back(owners.size() == 1 ? tail : tokenizer.encode_segments(slice(full, from, to), bos && pieces.empty()));
    joined.insert(joined.end(), pieces.back().begin(), pieces.back().end());
    from = to;
  }
  if (owners.empty() || from != text.size() || joined != tail) return;
  for (size_t k = 0; k < owners.size(); ++k) out.spans[owners[k]] = std::move(pieces[k]);
}

}  // namespace

std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                 const std::vector<ChatMessage>& messages, const std::tm& now) {
  const ChatSpecialTexts specials = special_texts(tokenizer);
  const std::vector<TextSegment> prompt = render_chat(chat_template, messages, specials, now);
  return tokenizer.encode_segments(prompt, needs_bos(tokenizer, specials, prompt));
}

ChatPrompt encode_chat_prompt(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                              const std::vector<ChatMessage>& messages, const std::vector<MessageTokens>& stored,
                              const std::string& identity, bool continue_answer, const std::tm& now) {
  const ChatSpecialTexts specials = special_texts(tokenizer);
  const std::vector<TextSegment> full = continue_answer ? render_open_answer(chat_template, messages, specials, now)
                                                        : render_chat(chat_template, messages, specials, now);
  const std::string text = joined_text(full);
  const IdRun run = reusable_run(tokenizer, chat_template, messages, stored, identity, specials, now, text);
  ChatPrompt out;
  out.spans.resize(messages.size());
  for (size_t i = 0; i < run.messages; ++i) {
    if (messages[i].role == "system") continue;
    out.spans[i] = stored[i].ids;
    out.tokens.insert(out.tokens.end(), stored[i].ids.begin(), stored[i].ids.end());
    ++out.reused_messages;
  }
  const bool bos = run.messages == 0 && needs_bos(tokenizer, specials, full);
  const std::vector<int32_t> tail = tokenizer.encode_segments(slice(full, run.text_end, text.size()), bos);
  out.tokens.insert(out.tokens.end(), tail.begin(), tail.end());
  attribute_text_part(out, tokenizer, chat_template, messages, full, text, now, run, bos, tail);
  return out;
}

}  // namespace kvdesk
