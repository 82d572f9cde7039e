// Chat templates: how a conversation becomes the prompt a model continues. The family is
// recognized from the GGUF's tokenizer.chat_template text (a Jinja program we do not run);
// each family is rendered by hand exactly as its reference Hugging Face template prints it,
// BOS/EOS texts and the generation prompt included. A model without a template
// (stories260K) gets Plain, which joins the messages so the model simply continues the story.
//
// Rendering produces segments: the template's own text (parse_special, where
// "<|im_start|>" is the control token) and the message contents (plain text, where the same
// characters are just characters), so what a user types can never forge a turn.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/jinja_default_system.h"
#include "engine/engine_types.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvdesk {

class GgufFile;

enum class ChatFormat : uint8_t {
  Plain, ChatML, Llama2, Llama3, Zephyr, Mistral, Gemma, Phi3, Qwen3, Phi4, Granite, MistralV7, DeepSeek, DeepSeekR1,
  Phi4Mini, MistralTekken, Qwen3Thinking, Harmony, MistralV1, MistralV1Unspaced
};
const char* chat_format_name(ChatFormat format);
// "chatml", "llama2", ... as chat_format_name spells them; nullopt for anything else.
std::optional<ChatFormat> chat_format_from_name(std::string_view name);
// All names, for help texts and error messages.
std::vector<std::string> chat_format_names();
// Whether the family's generation prompt opens the answer inside <think> (DeepSeek R1, Qwen3
// thinking): the model's text starts as reasoning.
bool generation_prompt_opens_reasoning(ChatFormat format);

struct ChatTemplate {
  ChatFormat format = ChatFormat::Plain;
  // ChatML, Granite and Mistral v7: the system message the template writes when the conversation
  // has none (Qwen: "You are Qwen, created by Alibaba Cloud. ..."; Granite 3.x and Mistral
  // Small 3: a text with today's date); empty when it writes none. Harmony: the system message
  // it always writes (identity, dates, reasoning effort, channels).
  DatedText default_system;
  // Llama 3 only: what Llama 3.1+ templates write at the start of a system turn they always
  // write ("Cutting Knowledge Date: December 2023\nToday Date: <date_string>\n\n": Llama 3.2's
  // strftime_now("%d %b %Y"), a date, and 3.1's "26 Jul 2024", a literal); empty for Llama 3.0.
  DatedText system_preamble;
  // Non-empty when the model's template was not recognized and ChatML stands in for it, or
  // when its default system message could not be read and conversations without a system
  // message go without it: front ends show it to the user.
  std::string warning;
};

// From the template text: ChatML (and Qwen's default system prompt), Qwen3 (ChatML with
// <think>; Qwen3 thinking when the generation prompt always opens <think>: QwQ, the 2507 thinking
// models), Phi-4 (<|im_sep|>), Llama 2 (with <<SYS>>), Llama 3 (and 3.1+'s system preamble),
// Mistral ([INST] without <<SYS>>), Mistral v1 (Mistral-7B-Instruct-v0.1/0.2, Mixtral-8x7B-Instruct:
// ' [INST] ' ... ' [/INST]', or their first template's '[INST] ' ... ' [/INST]'), Mistral tekken
// (Nemo's "[INST]" + without the spaces),
// Mistral v7 / tekken ([SYSTEM_PROMPT]), Gemma 2/3, Phi-3 (<|user|> ... <|end|>), Phi-4-mini
// (<|role|> ... <|end|> without line breaks), Zephyr (<|user|> ... </s>), Granite
// (<|start_of_role|>), DeepSeek (<｜User｜> ... <｜Assistant｜>: V3, R1-0528) and DeepSeek R1 (the
// same, the answer opened with <think>: the R1 distills of Qwen and Llama), Harmony (gpt-oss:
// <|start|>role<|message|>...<|end|>, answers in channels); anything else gives
// ChatML with a warning. Granite and Mistral v7 get the default system message their template
// computes (jinja_default_system), or a warning when it cannot be read.
ChatTemplate detect_chat_template(std::string_view template_text);
// The file's tokenizer.chat_template, or Plain when it has none. override_name non-empty:
// that family instead (throws kvdesk::Error naming an unknown name).
ChatTemplate chat_template_for(const GgufFile& file, std::string_view override_name);

// The texts the templates call bos_token and eos_token ("" when the vocabulary has none).
struct ChatSpecialTexts {
  std::string bos;
  std::string eos;
};

// The prompt for messages, ending where the assistant's next answer begins; now is the time
// the template's strftime_now() dates show. Throws kvdesk::Error for an unknown role or no
// messages.
std::vector<TextSegment> render_chat(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                     const ChatSpecialTexts& specials, const std::tm& now = local_now());
// The segments' texts joined.
std::string joined_text(const std::vector<TextSegment>& segments);

// Renders with the tokenizer's BOS/EOS texts and encodes, special tokens parsed in the
// template's segments only. BOS is added when the vocabulary asks for it
// (add_bos_default) and the template did not already write it, so never twice.
std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                 const std::vector<ChatMessage>& messages, const std::tm& now = local_now());

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
// message is an answer after another message. now: the time the template's dates show.
ChatPrompt encode_chat_prompt(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                              const std::vector<ChatMessage>& messages, const std::vector<MessageTokens>& stored,
                              const std::string& identity, bool continue_answer = false,
                              const std::tm& now = local_now());

}  // namespace kvdesk
