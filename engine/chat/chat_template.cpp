// Chat templates: a ChatTemplate holds a parsed Jinja program; rendering turns a conversation
// into template variables, runs the program, and splits its output into template text and
// conversation content by the provenance the engine tracked. The prefix logic below (which
// stored ids a new prompt can take) works on rendered text only, so it follows any template.
#include "engine/chat/chat_template.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "engine/chat/family_templates.h"
#include "engine/chat/jinja/json_text.h"
#include "engine/chat/jinja/template.h"
#include "engine/error.h"
#include "engine/gguf/gguf_reader.h"

namespace kvdesk {
namespace {

// What Jinja's trim and Python's str.strip() take off (ASCII: what an answer's padding holds).
constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return std::string(s.substr(begin, s.find_last_not_of(kWhitespace) - begin + 1));
}

std::string hash_text(std::string_view s) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(s.data(), s.size())));
  return buf;
}

jinja::Value content_string(const std::string& s) { return jinja::Value::string(jinja::Text::of_content(s)); }

// A role is template text when it is one of the roles templates write into their own tokens
// ("<|" + role + "|>" is Phi-3's <|user|>); any other role is content like the rest.
bool is_known_role(std::string_view role) {
  for (std::string_view known : {"system", "user", "assistant", "tool", "developer", "ipython", "function"}) {
    if (role == known) return true;
  }
  return false;
}

jinja::Value role_string(const std::string& role) {
  return is_known_role(role) ? jinja::Value::string(role) : content_string(role);
}

// A tool call's arguments as the templates read them: an object (they write it with tojson or
// iterate its items), also when the OpenAI message carries it as a JSON string, as vLLM and
// llama.cpp pass it to templates; a string that is not a JSON object stays a string. (A
// conversation given as JSON to `kvdesk-cli template` is rendered exactly as given, as
// transformers' apply_chat_template renders it.)
void arguments_as_objects(nlohmann::ordered_json& fields) {
  auto calls = fields.find("tool_calls");
  if (calls == fields.end() || !calls->is_array()) return;
  for (nlohmann::ordered_json& call : *calls) {
    if (!call.is_object()) continue;
    nlohmann::ordered_json* holder = call.contains("function") && call["function"].is_object() ? &call["function"] : &call;
    auto arguments = holder->find("arguments");
    if (arguments == holder->end() || !arguments->is_string()) continue;
    auto parsed = nlohmann::ordered_json::parse(arguments->get<std::string>(), nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) *arguments = std::move(parsed);
  }
}

jinja::Value message_value(const ChatMessage& m) {
  auto d = std::make_shared<jinja::Dict>();
  d->set(jinja::Value::string("role"), role_string(m.role));
  d->set(jinja::Value::string("content"), content_string(m.content));
  if (!m.fields_json.empty()) {
    auto fields = nlohmann::ordered_json::parse(m.fields_json, nullptr, false);
    if (fields.is_discarded() || !fields.is_object()) throw Error("a message's fields are not a JSON object");
    arguments_as_objects(fields);
    for (auto it = fields.begin(); it != fields.end(); ++it) {
      if (it.key() == "role" || it.key() == "content") continue;
      d->set(jinja::Value::string(it.key()), jinja::value_from_json(it.value(), true));
    }
  }
  return jinja::Value::dict(d);
}

// A message from JSON: content strings, its role as role_string marks it.
jinja::Value message_from_json(const nlohmann::ordered_json& j) {
  jinja::Value m = jinja::value_from_json(j, true);
  if (m.is_dict()) {
    if (const jinja::Value* role = m.dict_ref().find("role"); role && role->is_string()) {
      m.dict_ref().set(jinja::Value::string("role"), role_string(role->str()));
    }
  }
  return m;
}

// JSON text as template values (content), or `fallback` when the text is empty.
jinja::Value json_value(std::string_view text, const char* what, jinja::Value fallback) {
  if (text.empty()) return fallback;
  const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error(std::string(what) + " is not valid JSON");
  return jinja::value_from_json(j, true);
}

// The variables besides messages: tools and documents (none unless given, as transformers
// passes them), add_generation_prompt, then the kwargs, which may set any other.
void add_options(jinja::Dict& context, const ChatRenderOptions& options) {
  if (!options.tools_json.empty() || !context.find("tools")) {
    context.set(jinja::Value::string("tools"), json_value(options.tools_json, "the tools", jinja::Value::none()));
  }
  if (!context.find("documents")) context.set(jinja::Value::string("documents"), jinja::Value::none());
  context.set(jinja::Value::string("add_generation_prompt"), jinja::Value::boolean(options.add_generation_prompt));
  const jinja::Value kwargs = json_value(options.kwargs_json, "the template kwargs", jinja::Value::dict());
  if (!kwargs.is_dict()) throw Error("the template kwargs must be a JSON object");
  for (const auto& [k, v] : kwargs.dict_ref().entries) context.set(jinja::Value::string(k.str()), v);
}

// Runs of bytes with the same provenance, as segments.
std::vector<TextSegment> segments_of(const jinja::Text& text) {
  std::vector<TextSegment> out;
  for (size_t i = 0; i < text.bytes.size(); ++i) {
    const bool parse_special = !text.is_content(i);
    if (out.empty() || out.back().parse_special != parse_special) out.push_back({"", parse_special});
    out.back().text += text.bytes[i];
  }
  return out;
}

// Whether rendering one user message ends the generation prompt inside <think>.
bool renders_open_think(const ChatTemplate& t) {
  try {
    const std::string prompt = joined_text(render_chat(t, {{"user", "Hi"}}, {"", ""}, local_now()));
    const std::string end = trim(prompt);
    return end.ends_with("<think>");
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

ChatTemplate chat_template_from_source(std::string name, std::string source) {
  ChatTemplate out;
  out.name = std::move(name);
  out.source_hash = hash_text(source);
  try {
    out.program = std::make_shared<const jinja::Template>(source);
  } catch (const Error& e) {
    out.error = std::string("the chat template does not parse: ") + e.what();
    out.warning = out.error;
  }
  out.source = std::move(source);
  if (out.program) out.opens_reasoning = renders_open_think(out);
  return out;
}

ChatTemplate builtin_chat_template(std::string_view name) {
  const FamilyTemplate* family = find_family_template(name);
  if (!family) {
    std::string names;
    for (const FamilyTemplate& f : family_templates()) names += (names.empty() ? "" : ", ") + std::string(f.name);
    throw Error("unknown chat template '" + std::string(name) + "' (use one of " + names + ")");
  }
  return chat_template_from_source(std::string(family->name), std::string(family->source));
}

ChatTemplate chat_template_for(const GgufFile& file, std::string_view override_name, std::string_view override_source) {
  if (!override_source.empty()) {
    return chat_template_from_source("file " + std::string(override_name.empty() ? "template" : override_name),
                                     std::string(override_source));
  }
  if (!override_name.empty()) return builtin_chat_template(override_name);
  const std::optional<std::string> text = file.find_string("tokenizer.chat_template");
  if (!text || text->empty()) return builtin_chat_template("plain");
  return chat_template_from_source("own", *text);
}

jinja::Dict chat_context_from_json(std::string_view conversation_json, const ChatRenderOptions& options) {
  const auto j = nlohmann::ordered_json::parse(conversation_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error("the conversation is not a JSON object");
  if (!j.contains("messages") || !j["messages"].is_array()) throw Error("the conversation has no \"messages\" array");
  jinja::Dict context;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "messages") continue;
    context.set(jinja::Value::string(it.key()), jinja::value_from_json(it.value(), true));
  }
  jinja::ValueList messages;
  for (const nlohmann::ordered_json& m : j["messages"]) messages.push_back(message_from_json(m));
  context.set(jinja::Value::string("messages"), jinja::Value::list(std::move(messages)));
  add_options(context, options);
  return context;
}

std::vector<TextSegment> render_chat_context(const ChatTemplate& chat_template, const jinja::Dict& context,
                                             const ChatSpecialTexts& specials, const std::tm& now) {
  if (!chat_template.program) throw Error(chat_template.error);
  jinja::Dict variables = context;
  variables.set(jinja::Value::string("bos_token"), jinja::Value::string(specials.bos));
  variables.set(jinja::Value::string("eos_token"), jinja::Value::string(specials.eos));
  return segments_of(chat_template.program->render(variables, now));
}

std::vector<TextSegment> render_chat(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                     const ChatSpecialTexts& specials, const std::tm& now,
                                     const ChatRenderOptions& options) {
  if (messages.empty()) throw Error("a chat request needs at least one message");
  jinja::Dict context;
  jinja::ValueList list;
  for (const ChatMessage& m : messages) list.push_back(message_value(m));
  context.set(jinja::Value::string("messages"), jinja::Value::list(std::move(list)));
  add_options(context, options);
  return render_chat_context(chat_template, context, specials, now);
}

std::string joined_text(const std::vector<TextSegment>& segments) {
  std::string out;
  for (const TextSegment& s : segments) out += s.text;
  return out;
}

std::tm local_now() { return local_time(std::time(nullptr)); }

std::tm local_time(std::time_t time) {
  std::tm out{};
  localtime_r(&time, &out);
  return out;
}

ChatSpecialTexts special_texts(const Tokenizer& tokenizer) {
  return {tokenizer.piece(tokenizer.bos_id()), tokenizer.piece(tokenizer.eos_id())};
}

namespace {

constexpr size_t kNoEnd = std::string::npos;

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
                   const ChatSpecialTexts& specials, const std::tm& now, const ChatRenderOptions& options,
                   const std::string& full) {
  const bool answer = messages[i].role == "assistant";
  if (answer && i == 0) return kNoEnd;
  const std::vector<ChatMessage> head_messages(messages.begin(), messages.begin() + ptrdiff_t(answer ? i : i + 1));
  const std::string head = joined_text(render_chat(chat_template, head_messages, specials, now, options));
  if (!full.starts_with(head)) return kNoEnd;
  return answer ? answer_end(full, head.size(), messages[i].content) : head.size();
}

// The conversation up to the end of its last message, an answer left open for the model to carry
// on: the messages before it as the template renders them (ending with the generation prompt),
// then the answer's text. This is where message_end puts the end of an answer.
std::vector<TextSegment> render_open_answer(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                            const ChatSpecialTexts& specials, const std::tm& now,
                                            const ChatRenderOptions& options) {
  if (messages.size() < 2 || messages.back().role != "assistant") {
    throw Error("only an answer that follows another message can be continued");
  }
  std::vector<TextSegment> out =
      render_chat(chat_template, std::vector<ChatMessage>(messages.begin(), messages.end() - 1), specials, now, options);
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
                   const ChatSpecialTexts& specials, const std::tm& now, const ChatRenderOptions& options,
                   const std::string& full) {
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
    const size_t end = message_end(chat_template, messages, count - 1, specials, now, options, full);
    if (end != kNoEnd) return {count, end};
  }
  return {};
}

// The spans of the messages after the run when the text part splits exactly at their ends:
// pieces encoded one by one must give the tokens the whole text part gave.
void attribute_text_part(ChatPrompt& out, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                         const std::vector<ChatMessage>& messages, const std::vector<TextSegment>& full,
                         const std::string& text, const std::tm& now, const ChatRenderOptions& options, IdRun run,
                         bool bos, const std::vector<int32_t>& tail) {
  const ChatSpecialTexts specials = special_texts(tokenizer);
  std::vector<size_t> owners;
  for (size_t i = run.messages; i < messages.size(); ++i) {
    if (messages[i].role != "system") owners.push_back(i);
  }
  std::vector<std::vector<int32_t>> pieces;
  std::vector<int32_t> joined;
  size_t from = run.text_end;
  for (size_t i : owners) {
    const size_t to = message_end(chat_template, messages, i, specials, now, options, text);
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
                              const std::string& identity, bool continue_answer, const std::tm& now,
                              const ChatRenderOptions& options) {
  const ChatSpecialTexts specials = special_texts(tokenizer);
  const std::vector<TextSegment> full = continue_answer
                                            ? render_open_answer(chat_template, messages, specials, now, options)
                                            : render_chat(chat_template, messages, specials, now, options);
  const std::string text = joined_text(full);
  const IdRun run = reusable_run(tokenizer, chat_template, messages, stored, identity, specials, now, options, text);
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
  attribute_text_part(out, tokenizer, chat_template, messages, full, text, now, options, run, bos, tail);
  return out;
}

}  // namespace kvdesk
