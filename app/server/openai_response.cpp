// OpenAI response shapes. Chat puts text in message.content (whole) or delta.content (chunks),
// its reasoning in reasoning_content; completions put it in choices[0].text either way.
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

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

ResponseShape::ResponseShape(Endpoint endpoint, std::string model_id, bool opened_in_reasoning)
    : endpoint_(endpoint),
      id_(random_id(endpoint == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      model_id_(std::move(model_id)),
      opened_in_reasoning_(opened_in_reasoning) {}

json ResponseShape::full(const std::string& text, const std::string& finish_reason, const Usage& usage) const {
  json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  if (endpoint_ == Endpoint::ChatCompletions) {
    const AnswerParts parts = split_answer(text, opened_in_reasoning_);
    choice["message"] = {{"role", "assistant"}, {"content", parts.answer}};
    if (!parts.reasoning.empty()) choice["message"]["reasoning_content"] = parts.reasoning;
  } else {
    choice["text"] = text;
  }
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::ChatCompletions ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_id_},
          {"choices", json::array({choice})},
          {"usage", usage_json(usage)}};
}

json ResponseShape::chunk(json choice) const {
  return {{"id", id_},
          {"object", endpoint_ == Endpoint::ChatCompletions ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_id_},
          {"choices", choice.is_null() ? json::array() : json::array({std::move(choice)})}};
}

json ResponseShape::first() const {
  return chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
}

json ResponseShape::content(const std::string& text) const {
  if (endpoint_ == Endpoint::ChatCompletions) {
    return chunk({{"index", 0}, {"delta", {{"content", text}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
  }
  return chunk({{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
}

json ResponseShape::answer_delta(const AnswerParts& delta) const {
  json fields = json::object();
  if (!delta.reasoning.empty()) fields["reasoning_content"] = delta.reasoning;
  if (!delta.answer.empty()) fields["content"] = delta.answer;
  return chunk({{"index", 0}, {"delta", fields}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
}

json ResponseShape::last(const std::string& finish_reason) const {
  if (endpoint_ == Endpoint::ChatCompletions) {
    return chunk({{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish_reason}});
  }
  return chunk({{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", finish_reason}});
}

// OpenAI's include_usage chunk: no choices, the usage of the whole request.
json ResponseShape::usage(const Usage& usage) const {
  json c = chunk(nullptr);
  c["usage"] = usage_json(usage);
  return c;
}

std::string sse_event(const json& value) { return "data: " + json_body(value) + "\n\n"; }

}  // namespace kvdesk::server
