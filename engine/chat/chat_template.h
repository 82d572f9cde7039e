// Chat templates: how a conversation becomes the prompt a model continues. A model's own
// tokenizer.chat_template (Jinja) is rendered by kvdesk's Jinja engine (engine/chat/jinja/) as
// Hugging Face's transformers renders it; the named families (chatml, llama3, ...) are built-in
// Jinja sources used only when asked for by name or when a GGUF carries no template, and a
// --chat-template-file source stands in for the model's. A model without any template
// (stories260K) gets plain, which joins the messages so the model simply continues the story.
//
// Rendering produces segments: the template's own text (parse_special, where "<|im_start|>" is
// the control token) and what the conversation brought (message contents, tool definitions:
// plain text, where the same characters are just characters), so what a user types can never
// forge a turn. The Jinja engine tracks that provenance byte by byte.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_types.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvdesk {

class GgufFile;
namespace jinja {
class Template;
struct Dict;
}

struct ChatTemplate {
  // "own" (the model's tokenizer.chat_template), a family name, "file <name>" for a
  // --chat-template-file source, or "plain".
  std::string name;
  std::string source;                                // the Jinja source
  std::shared_ptr<const jinja::Template> program;    // null when the source did not parse
  // Why the template cannot render (a syntax error naming its line); rendering throws it.
  std::string error;
  // The generation prompt ends inside <think> (DeepSeek R1, Qwen3 thinking): the model's text
  // starts as reasoning. Found by rendering a one-message conversation.
  bool opens_reasoning = false;
  // What the front ends show beside the name: the template could not be parsed, or the
  // conversation-independent check above failed.
  std::string warning;
  // A short hash of the source, part of what stored token ids are valid for.
  std::string source_hash;
};

// A template from Jinja source; a source that does not parse gives a ChatTemplate whose error
// (and warning) names the line, and whose rendering throws it.
ChatTemplate chat_template_from_source(std::string name, std::string source);
// The built-in family `name`; throws kvdesk::Error listing the names for an unknown one.
ChatTemplate builtin_chat_template(std::string_view name);
// The file's tokenizer.chat_template ("own"), or plain when it has none. override_name
// non-empty: that family instead; override_source non-empty: that Jinja source (named
// "file <override_name or 'template'>") instead of both.
ChatTemplate chat_template_for(const GgufFile& file, std::string_view override_name,
                               std::string_view override_source = {});

// The calendar time strftime_now() formats: now, local time (what Hugging Face's
// datetime.now() gives the template).
std::tm local_now();
// The local calendar time of a Unix time in seconds.
std::tm local_time(std::time_t time);

// What a conversation brings besides its messages: OpenAI-shaped tool definitions (JSON text
// of an array; empty: none), add_generation_prompt, and other variables the template reads
// (chat_template_kwargs such as enable_thinking: a JSON object's text; empty: none).
struct ChatRenderOptions {
  std::string tools_json;
  bool add_generation_prompt = true;
  std::string kwargs_json;
};

// The texts the templates call bos_token and eos_token ("" when the vocabulary has none).
struct ChatSpecialTexts {
  std::string bos;
  std::string eos;
};

// The prompt for messages, ending where the assistant's next answer begins; now is the time
// the template's strftime_now() dates show. Throws kvdesk::Error for no messages, and with the
// template's line and message for a template that cannot render them (raise_exception).
std::vector<TextSegment> render_chat(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                     const ChatSpecialTexts& specials, const std::tm& now = local_now(),
                                     const ChatRenderOptions& options = {});
// The same for a conversation already in template values: `context` holds messages, tools and
// any other variables; bos_token, eos_token and the global functions are added.
std::vector<TextSegment> render_chat_context(const ChatTemplate& chat_template, const jinja::Dict& context,
                                             const ChatSpecialTexts& specials, const std::tm& now);
// A conversation in OpenAI's JSON shape ({"messages": [...], "tools": [...]}, assistant
// tool_calls with arguments as an object or a JSON string, tool messages, reasoning_content)
// as template variables, every string marked as conversation content; tools and documents are
// none when absent, as transformers passes them. Throws kvdesk::Error for a malformed one.
jinja::Dict chat_context_from_json(std::string_view conversation_json, const ChatRenderOptions& options);

// The segments' texts joined.
std::string joined_text(const std::vector<TextSegment>& segments);

// Renders with the tokenizer's BOS/EOS texts and encodes, special tokens parsed in the
// template's segments only. BOS is added when the vocabulary asks for it
// (add_bos_default) and the template did not already write it, so never twice.
std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                 const std::vector<ChatMessage>& messages, const std::tm& now = local_now());
// The texts bos_token and eos_token stand for in the tokenizer's vocabulary.
ChatSpecialTexts special_texts(const Tokenizer& tokenizer);

// A chat prompt with each message's span of it (MessageTokens in engine_types.h).
struct ChatPrompt {
  std::vector<int32_t> tokens;
  std::vector<std::vector<int32_t>> spans;   // [messages] empty: a system message, or not attributable
  int32_t reused_messages = 0;               // messages whose stored ids the prompt took
};

// encode_chat that reuses stored spans: the longest leading run of messages whose `stored` ids
// carry `identity` and are in the vocabulary (a first system message rides in the first span),
// and that the template renders as a prefix of the whole conversation, is taken as ids; the rest
// is the rendered text after that point. An answer's ids stand for its content wherever the
// template puts it, whitespace the template pads or trims around it included (Llama 2,
// Mistral); a template that drops an answer's old thinking (Qwen3) ends the run before it. `stored` is empty or one
// per message. Without a usable run the tokens are exactly encode_chat's. The spans of the text
// part are reported when they are exact: one message, or pieces that encode as the whole does.
// continue_answer: the last message is an answer the model carries on: the prompt ends with its
// text, left open (no end of turn, no next generation prompt); throws Error unless the last
// message is an answer after another message. now: the time the template's dates show;
// options: the tools and kwargs every rendering of the conversation gets.
ChatPrompt encode_chat_prompt(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                              const std::vector<ChatMessage>& messages, const std::vector<MessageTokens>& stored,
                              const std::string& identity, bool continue_answer = false,
                              const std::tm& now = local_now(), const ChatRenderOptions& options = {});

}  // namespace kvdesk
