// OpenAI response shapes. Chat puts text in message.content (whole) or delta.content (chunks),
// its reasoning in reasoning_content and its tool calls in tool_calls; completions put text in
// choices[i].text either way. Log-probabilities take each endpoint's own shape: chat's
// logprobs.content entries (token, logprob, bytes, top_logprobs), completions' parallel arrays
// (tokens, token_logprobs, top_logprobs, text_offset).
#include "app/server/openai_response.h"

#include <chrono>
#include <random>

#include "app/server/api_error.h"

namespace kvdesk::server {
namespace {

using nlohmann::json;

std::string random_id(const char* prefix) {
  static const char kDigits[] = "0123456789abcdef";
  std::random_device rd;
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kDigits[rd() % 16];
  return id;
}

json byte_values(const std::string& bytes) {
  json out = json::array();
  for (unsigned char b : bytes) out.push_back(int(b));
  return out;
}

json chat_logprob(const std::string& bytes, float logprob) {
  return {{"token", bytes}, {"logprob", logprob}, {"bytes", byte_values(bytes)}};
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls) {
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

// A streamed tool call: its first delta names it (index, id, type, name), later ones add
// arguments text, which the client joins per index.
json tool_call_delta(const ToolCallDelta& d) {
  json call = {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
  if (!d.name.empty()) {
    call["id"] = d.id;
    call["type"] = "function";
    call["function"]["name"] = d.name;
  }
  return {{"tool_calls", json::array({call})}};
}

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

ResponseShape::ResponseShape(Endpoint endpoint, std::string model_id, bool opened_in_reasoning, ToolCallFormat tools,
                             bool logprobs)
    : endpoint_(endpoint),
      id_(random_id(endpoint == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      model_id_(std::move(model_id)),
      opened_in_reasoning_(opened_in_reasoning),
      tools_(tools),
      logprobs_(logprobs) {}

json ResponseShape::logprobs_json(const std::vector<LogprobEntry>& entries, size_t text_offset) const {
  if (!logprobs_) return nullptr;
  if (endpoint_ == Endpoint::ChatCompletions) {
    json content = json::array();
    for (const LogprobEntry& e : entries) {
      json entry = chat_logprob(e.bytes, e.logprob);
      entry["top_logprobs"] = json::array();
      for (const TokenLogprob& t : e.top) entry["top_logprobs"].push_back(chat_logprob(t.bytes, t.logprob));
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const LogprobEntry& e : entries) {
    out["tokens"].push_back(e.bytes);
    out["token_logprobs"].push_back(e.logprob);
    json top = json::object();
    for (const TokenLogprob& t : e.top) top[t.bytes] = t.logprob;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += e.bytes.size();
  }
  return out;
}

json ResponseShape::full(const std::vector<ChoiceAnswer>& answers, const Usage& usage) const {
  json choices = json::array();
  for (size_t i = 0; i < answers.size(); ++i) {
    const ChoiceAnswer& a = answers[i];
    json choice = {{"index", i}, {"finish_reason", a.finish_reason}, {"logprobs", logprobs_json(a.logprobs)}};
    if (endpoint_ == Endpoint::ChatCompletions) {
      // Harmony's calls are messages of their own channel, which split_answer would take for
      // reasoning: they come out of the raw text first. Other families write calls in the answer.
      const bool calls_first = tools_ == ToolCallFormat::Harmony;
      const AnswerParts parts = split_answer(calls_first ? parse_tool_calls(tools_, a.text).content : a.text,
                                             opened_in_reasoning_);
      ParsedAnswer parsed = calls_first ? parse_tool_calls(tools_, a.text) : parse_tool_calls(tools_, parts.answer);
      if (calls_first) parsed.content = parts.answer;
      choice["message"] = {{"role", "assistant"}, {"content", parsed.content}};
      if (!parts.reasoning.empty()) choice["message"]["reasoning_content"] = parts.reasoning;
      if (!parsed.tool_calls.empty()) {
        choice["message"]["tool_calls"] = tool_calls_json(parsed.tool_calls);
        if (parsed.content.empty()) choice["message"]["content"] = nullptr;
        if (a.finish_reason == "stop") choice["finish_reason"] = "tool_calls";
      }
    } else {
      choice["text"] = a.text;
    }
    choices.push_back(std::move(choice));
  }
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::ChatCompletions ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_id_},
          {"choices", std::move(choices)},
          {"usage", usage_json(usage)}};
}

json ResponseShape::chunk(json choice) const {
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::ChatCompletions ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_id_},
          {"choices", choice.is_null() ? json::array() : json::array({std::move(choice)})}};
}

json ResponseShape::delta_chunk(int32_t index, json delta, const std::vector<LogprobEntry>& logprobs) const {
  return chunk({{"index", index}, {"delta", std::move(delta)}, {"logprobs", logprobs_json(logprobs)}, {"finish_reason", nullptr}});
}

json ResponseShape::first(int32_t index) const {
  return chunk({{"index", index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
}

std::vector<json> ResponseShape::piece(ChoiceStream& stream, int32_t index, const std::string& text,
                                       const std::vector<LogprobEntry>& logprobs) const {
  if (endpoint_ != Endpoint::ChatCompletions) {
    if (text.empty() && logprobs.empty()) return {};
    json c = chunk({{"index", index}, {"text", text}, {"logprobs", logprobs_json(logprobs, stream.text_offset)}, {"finish_reason", nullptr}});
    stream.text_offset += text.size();
    return {std::move(c)};
  }
  std::vector<json> out;
  if (tools_ == ToolCallFormat::Harmony) {
    std::vector<ToolCallDelta> deltas;
    stream.tool_calls.push(text, deltas);
    out = harmony_chunks(stream, index, deltas, logprobs);
  } else {
    out = answer_chunks(stream, index, stream.answer.feed(text), logprobs);
  }
  if (out.empty() && logprobs_ && !logprobs.empty()) out.push_back(delta_chunk(index, json::object(), logprobs));
  return out;
}

// A reasoning delta goes out as it is; an answer delta through the tool-call stream, which
// holds back what may be markup and turns calls into tool_calls deltas. Log-probabilities ride
// on the first chunk.
std::vector<json> ResponseShape::answer_chunks(ChoiceStream& stream, int32_t index, const AnswerParts& delta,
                                               const std::vector<LogprobEntry>& logprobs) const {
  std::vector<json> out;
  const std::vector<LogprobEntry> none;
  auto logprobs_once = [&]() -> const std::vector<LogprobEntry>& { return out.empty() ? logprobs : none; };
  if (!delta.reasoning.empty()) out.push_back(delta_chunk(index, {{"reasoning_content", delta.reasoning}}, logprobs_once()));
  std::vector<ToolCallDelta> deltas;
  stream.tool_calls.push(delta.answer, deltas);
  for (const ToolCallDelta& d : deltas) {
    if (!d.content.empty()) out.push_back(delta_chunk(index, {{"content", d.content}}, logprobs_once()));
    if (d.index < 0) continue;
    stream.called_tools = true;
    out.push_back(delta_chunk(index, tool_call_delta(d), logprobs_once()));
  }
  return out;
}

// Harmony: the tool-call stream saw the raw text; what it passes on is the channels' text,
// split into reasoning and answer here, its calls go out as they are.
std::vector<json> ResponseShape::harmony_chunks(ChoiceStream& stream, int32_t index, const std::vector<ToolCallDelta>& deltas,
                                                const std::vector<LogprobEntry>& logprobs) const {
  std::vector<json> out;
  const std::vector<LogprobEntry> none;
  for (const ToolCallDelta& d : deltas) {
    const AnswerParts parts = stream.answer.feed(d.content);
    if (!parts.reasoning.empty()) {
      out.push_back(delta_chunk(index, {{"reasoning_content", parts.reasoning}}, out.empty() ? logprobs : none));
    }
    if (!parts.answer.empty()) out.push_back(delta_chunk(index, {{"content", parts.answer}}, out.empty() ? logprobs : none));
    if (d.index < 0) continue;
    stream.called_tools = true;
    out.push_back(delta_chunk(index, tool_call_delta(d), out.empty() ? logprobs : none));
  }
  return out;
}

std::vector<json> ResponseShape::finish(ChoiceStream& stream, int32_t index, const std::string& finish_reason) const {
  std::vector<json> out;
  std::string reason = finish_reason;
  if (endpoint_ == Endpoint::ChatCompletions) {
    std::vector<ToolCallDelta> deltas;
    stream.tool_calls.finish(deltas);
    if (tools_ == ToolCallFormat::Harmony) {
      out = harmony_chunks(stream, index, deltas, {});
    } else {
      for (const ToolCallDelta& d : deltas) {
        if (!d.content.empty()) out.push_back(delta_chunk(index, {{"content", d.content}}, {}));
        if (d.index < 0) continue;
        stream.called_tools = true;
        out.push_back(delta_chunk(index, tool_call_delta(d), {}));
      }
    }
    if (stream.called_tools && reason == "stop") reason = "tool_calls";
    out.push_back(chunk({{"index", index}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", reason}}));
  } else {
    out.push_back(chunk({{"index", index}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", reason}}));
  }
  return out;
}

// OpenAI's include_usage chunk: no choices, the usage of the whole request.
json ResponseShape::usage(const Usage& usage) const {
  json c = chunk(nullptr);
  c["usage"] = usage_json(usage);
  return c;
}

ChatMessage chat_message_of(const json& message) {
  ChatMessage out{"assistant", message.value("content", json()).is_string() ? message["content"].get<std::string>() : ""};
  json fields = json::object();
  for (const char* key : {"tool_calls", "reasoning_content"}) {
    if (message.contains(key)) fields[key] = message[key];
  }
  if (!fields.empty()) out.fields_json = fields.dump(-1, ' ', false, json::error_handler_t::replace);
  return out;
}

void StreamedMessage::add(const json& chunk) {
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return;
  for (const json& choice : *choices) {
    if (choice.value("index", -1) != index_ || !choice.contains("delta")) continue;
    const json& delta = choice["delta"];
    // Appended in place: a long answer comes in thousands of chunks.
    for (const char* key : {"content", "reasoning_content"}) {
      if (!delta.contains(key) || !delta[key].is_string()) continue;
      json& text = message_[key];
      if (!text.is_string()) text = "";
      text.get_ref<std::string&>() += delta[key].get_ref<const std::string&>();
    }
    if (!delta.contains("tool_calls")) continue;
    json& calls = message_["tool_calls"];
    if (!calls.is_array()) calls = json::array();
    for (const json& piece : delta["tool_calls"]) {
      const size_t at = size_t(std::max(0, piece.value("index", 0)));
      while (calls.size() <= at) calls.push_back({{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
      json& call = calls[at];
      if (piece.contains("id") && piece["id"].is_string()) call["id"] = piece["id"];
      const json function = piece.value("function", json::object());
      if (function.contains("name") && function["name"].is_string()) call["function"]["name"] = function["name"];
      if (function.contains("arguments") && function["arguments"].is_string()) {
        call["function"]["arguments"].get_ref<std::string&>() += function["arguments"].get_ref<const std::string&>();
      }
    }
  }
}

std::string sse_event(const json& value) { return "data: " + json_body(value) + "\n\n"; }

}  // namespace kvdesk::server
