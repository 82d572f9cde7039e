// Client side of the OpenAI streaming format; see openai_stream.h.
#include "app/remote/openai_stream.h"

#include "engine/error.h"

namespace kvdesk::remote {
namespace {

using nlohmann::json;

json messages_json(const std::vector<ChatMessage>& messages) {
  json out = json::array();
  for (const ChatMessage& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

void add_sampling(const Request& r, json& body) {
  const SamplingParams& s = r.sampling;
  body["temperature"] = s.temperature;
  body["top_p"] = s.top_p;
  if (s.top_k > 0) body["top_k"] = s.top_k;
  if (s.min_p > 0) body["min_p"] = s.min_p;
  if (s.presence_penalty != 0) body["presence_penalty"] = s.presence_penalty;
  if (s.frequency_penalty != 0) body["frequency_penalty"] = s.frequency_penalty;
  body["seed"] = s.seed;
  if (!s.logit_bias.empty()) {
    json biases = json::object();
    for (const auto& [id, bias] : s.logit_bias) biases[std::to_string(id)] = bias;
    body["logit_bias"] = biases;
  }
  body["max_tokens"] = r.max_tokens;
}

void read_usage(const json& usage, StreamState& state) {
  state.prompt_tokens = usage.value("prompt_tokens", 0);
  state.completion_tokens = usage.value("completion_tokens", 0);
  const json details = usage.value("prompt_tokens_details", json::object());
  if (details.is_object()) state.cached_tokens = details.value("cached_tokens", 0);
}

// The text of a delta's string field, "" when absent or not a string.
std::string delta_text(const json& delta, const char* field) {
  const json& value = delta.value(field, json());
  return value.is_string() ? value.get<std::string>() : std::string();
}

// A chat delta: its reasoning inside <think> ... </think>, then its content.
void read_delta(const json& delta, StreamState& state) {
  std::string reasoning = delta_text(delta, "reasoning_content");
  if (reasoning.empty()) reasoning = delta_text(delta, "reasoning");
  const std::string content = delta_text(delta, "content");
  if (!reasoning.empty()) {
    if (!state.in_reasoning) state.delta += "<think>\n";
    state.in_reasoning = true;
    state.delta += reasoning;
  }
  if (!content.empty()) {
    if (state.in_reasoning) state.delta += "\n</think>\n\n";
    state.in_reasoning = false;
    state.delta += content;
  }
}

// A chat chunk carries delta.content (and its reasoning); a completions chunk carries text.
void read_choice(const json& choice, StreamState& state) {
  if (choice.contains("delta") && choice["delta"].is_object()) {
    read_delta(choice["delta"], state);
  } else if (choice.contains("text") && choice["text"].is_string()) {
    state.delta = choice["text"].get<std::string>();
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    state.finish_reason = choice["finish_reason"].get<std::string>();
  }
}

}  // namespace

OpenAiCall openai_call(const Request& request, const std::string& model) {
  OpenAiCall call;
  json& body = call.body;
  body["model"] = model;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  add_sampling(request, body);
  if (!request.messages.empty()) {
    call.path = "/v1/chat/completions";
    body["messages"] = messages_json(request.messages);
  } else if (!request.prompt_text.empty()) {
    call.path = "/v1/completions";
    body["prompt"] = request.prompt_text;
  } else {
    throw Error("a remote server takes chat messages or prompt text, not token ids");
  }
  return call;
}

void read_stream_chunk(const std::string& data, StreamState& state) {
  state.delta.clear();
  if (data == "[DONE]") {
    state.done = true;
    return;
  }
  json chunk;
  try {
    chunk = json::parse(data);
  } catch (const json::exception&) {
    throw Error("the server sent a stream chunk that is not JSON: " + data.substr(0, 200));
  }
  if (!chunk.is_object()) throw Error("the server sent a stream chunk that is not an object");
  if (chunk.contains("error")) {
    const json& e = chunk["error"];
    throw Error("the server reported: " + (e.is_object() ? e.value("message", e.dump()) : e.dump()));
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) read_usage(chunk["usage"], state);
  const json choices = chunk.value("choices", json::array());
  if (choices.is_array() && !choices.empty() && choices[0].is_object()) read_choice(choices[0], state);
}

FinishReason finish_reason_from_openai(const std::string& reason) {
  return reason == "length" ? FinishReason::Length : FinishReason::Stop;
}

}  // namespace kvdesk::remote
