// OpenAI request parsing: the body's JSON is read once, then each field by a typed helper that
// names the field in its error. Ranges follow the OpenAI API where it has one (temperature
// [0, 2], penalties [-2, 2]) and the engine's sampler elsewhere.
#include "app/server/openai_request.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <random>

#include "app/server/api_error.h"
#include "engine/error.h"

namespace kvdesk::server {
namespace {

using nlohmann::json;

// Deeper bodies are refused before anything reads them (no request needs more than 4).
constexpr int kMaxNesting = 32;
constexpr size_t kMaxStops = 16;
constexpr size_t kMaxLogitBiases = 1024;

json parse_body(std::string_view body) {
  bool too_deep = false;
  const json::parser_callback_t depth_guard = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxNesting) too_deep = true;
    return !too_deep;
  };
  json j = json::parse(body.begin(), body.end(), depth_guard, /*allow_exceptions=*/false);
  if (too_deep) throw invalid_request("the request body nests JSON deeper than " + std::to_string(kMaxNesting) + " levels");
  if (j.is_discarded()) throw invalid_request("the request body is not valid JSON");
  if (!j.is_object()) throw invalid_request("the request body must be a JSON object");
  return j;
}

// The field, or nullptr when it is absent or null.
const json* field(const json& body, const std::string& name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

void require(bool ok, const std::string& message, const std::string& param) {
  if (!ok) throw invalid_request(message, param);
}

std::optional<double> optional_number(const json& body, const std::string& name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  require(v->is_number(), "'" + name + "' must be a number", name);
  return v->get<double>();
}

std::optional<int64_t> optional_integer(const json& body, const std::string& name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  require(v->is_number_integer(), "'" + name + "' must be an integer", name);
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    require(u <= uint64_t(std::numeric_limits<int64_t>::max()), "'" + name + "' is too large", name);
    return int64_t(u);
  }
  return v->get<int64_t>();
}

std::optional<bool> optional_bool(const json& body, const std::string& name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  require(v->is_boolean(), "'" + name + "' must be true or false", name);
  return v->get<bool>();
}

float number_in_range(const json& body, const std::string& name, float fallback, double low, double high,
                      const std::string& range) {
  const std::optional<double> v = optional_number(body, name);
  if (!v) return fallback;
  require(*v >= low && *v <= high, "'" + name + "' must be in " + range, name);
  return float(*v);
}

// The seed: OpenAI takes any integer; none asked for draws a fresh one.
uint64_t seed_of(const json& body) {
  const json* v = field(body, "seed");
  if (!v) return std::random_device{}();
  require(v->is_number_integer(), "'seed' must be an integer", "seed");
  return v->is_number_unsigned() ? v->get<uint64_t>() : uint64_t(v->get<int64_t>());
}

// A logit_bias key as a token id: decimal digits only (at most 9, so it fits), else -1.
int64_t token_id_of_key(const std::string& key) {
  const bool digits = !key.empty() && key.size() <= 9 &&
                      std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
  return digits ? std::stoll(key) : -1;
}

// logit_bias: {"token id": bias}, each id in the vocabulary, each bias in [-100, 100].
std::vector<std::pair<int32_t, float>> logit_bias_of(const json& body, int32_t vocab_size) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  require(v->is_object(), "'logit_bias' must be an object of token ids to biases", "logit_bias");
  require(v->size() <= kMaxLogitBiases, "'logit_bias' has more than " + std::to_string(kMaxLogitBiases) + " tokens",
          "logit_bias");
  std::vector<std::pair<int32_t, float>> biases;
  for (const auto& [key, bias] : v->items()) {
    const int64_t id = token_id_of_key(key);
    require(id >= 0 && id < vocab_size,
            "'logit_bias' keys must be token ids from 0 to " + std::to_string(vocab_size - 1) + "; got '" + key + "'",
            "logit_bias");
    require(bias.is_number() && bias.get<double>() >= -100 && bias.get<double>() <= 100,
            "'logit_bias' values must be numbers in [-100, 100]", "logit_bias");
    biases.emplace_back(int32_t(id), bias.get<float>());
  }
  return biases;
}

SamplingParams sampling_of(const json& body, const ModelLimits& limits) {
  SamplingParams s;
  s.temperature = number_in_range(body, "temperature", 1.0f, 0, 2, "[0, 2]");
  s.top_p = number_in_range(body, "top_p", 1.0f, 0, 1, "(0, 1]");
  require(s.top_p > 0, "'top_p' must be in (0, 1]", "top_p");
  s.min_p = number_in_range(body, "min_p", 0.0f, 0, 1, "[0, 1)");
  require(s.min_p < 1, "'min_p' must be in [0, 1)", "min_p");
  s.presence_penalty = number_in_range(body, "presence_penalty", 0.0f, -2, 2, "[-2, 2]");
  s.frequency_penalty = number_in_range(body, "frequency_penalty", 0.0f, -2, 2, "[-2, 2]");
  s.repeat_penalty = number_in_range(body, "repetition_penalty", 1.0f, 0, 10, "(0, 10]");
  require(s.repeat_penalty > 0, "'repetition_penalty' must be in (0, 10]", "repetition_penalty");
  if (const std::optional<int64_t> k = optional_integer(body, "top_k")) {
    require(*k >= -1 && *k <= std::numeric_limits<int32_t>::max(), "'top_k' must be -1 (off) or more", "top_k");
    s.top_k = int32_t(std::max<int64_t>(*k, 0));
  }
  s.seed = seed_of(body);
  s.logit_bias = logit_bias_of(body, limits.vocab_size);
  try {
    validate_sampling_params(s);
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
  return s;
}

// max_completion_tokens (the newer name) wins over max_tokens; both are capped at the context.
int32_t max_tokens_of(const json& body, const ModelLimits& limits) {
  for (const char* name : {"max_completion_tokens", "max_tokens"}) {
    if (const std::optional<int64_t> n = optional_integer(body, name)) {
      require(*n >= 1, std::string("'") + name + "' must be at least 1", name);
      return int32_t(std::min<int64_t>(*n, limits.context_length));
    }
  }
  return limits.context_length;
}

std::vector<std::string> stops_of(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else {
    require(v->is_array(), "'stop' must be a string or an array of strings", "stop");
    require(v->size() <= kMaxStops, "'stop' has more than " + std::to_string(kMaxStops) + " strings", "stop");
    for (const json& s : *v) {
      require(s.is_string(), "'stop' must be a string or an array of strings", "stop");
      stops.push_back(s.get<std::string>());
    }
  }
  for (const std::string& s : stops) require(!s.empty(), "'stop' strings must not be empty", "stop");
  return stops;
}

// Fields this server cannot honour are refused rather than silently ignored.
void refuse_unsupported(const json& body) {
  if (const std::optional<int64_t> n = optional_integer(body, "n")) require(*n == 1, "only 'n': 1 is supported", "n");
  if (const json* tools = field(body, "tools")) {
    require(tools->is_array() && tools->empty(), "tools are not supported", "tools");
  }
  if (const json* functions = field(body, "functions")) {
    require(functions->is_array() && functions->empty(), "functions are not supported", "functions");
  }
  if (const json* format = field(body, "response_format")) {
    require(format->is_object() && format->value("type", json()) == "text",
            "only 'response_format': {\"type\": \"text\"} is supported (no JSON mode or schema)", "response_format");
  }
  if (const json* logprobs = field(body, "logprobs")) {
    const bool asked = logprobs->is_boolean() ? logprobs->get<bool>() : !(logprobs->is_number() && logprobs->get<double>() == 0);
    require(!asked, "logprobs are not supported", "logprobs");
  }
  if (const json* model = field(body, "model")) require(model->is_string(), "'model' must be a string", "model");
}

// Fields both endpoints share: sampling, length, stop strings, streaming.
CompletionRequest common_fields(const json& body, Endpoint endpoint, const ModelLimits& limits) {
  refuse_unsupported(body);
  CompletionRequest r;
  r.endpoint = endpoint;
  r.engine.sampling = sampling_of(body, limits);
  r.engine.max_tokens = max_tokens_of(body, limits);
  r.stop = stops_of(body);
  r.stream = optional_bool(body, "stream").value_or(false);
  if (const json* options = field(body, "stream_options")) {
    require(options->is_object(), "'stream_options' must be an object", "stream_options");
    r.include_usage = optional_bool(*options, "include_usage").value_or(false);
  }
  return r;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts joined.
std::string content_of(const json& message, const std::string& param) {
  const json* content = field(message, "content");
  if (!content) return {};
  if (content->is_string()) return content->get<std::string>();
  require(content->is_array(), "'content' must be a string or an array of text parts", param);
  std::string text;
  for (const json& part : *content) {
    require(part.is_object() && part.value("type", json()) == "text" && part.contains("text") && part["text"].is_string(),
            "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported", param);
    text += part["text"].get<std::string>();
  }
  return text;
}

ChatMessage message_of(const json& message, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "]";
  require(message.is_object(), "each message must be an object", param);
  const json* role = field(message, "role");
  require(role && role->is_string(), "each message needs a string 'role'", param + ".role");
  std::string name = role->get<std::string>();
  if (name == "developer") name = "system";
  require(name == "system" || name == "user" || name == "assistant",
          "unsupported role '" + role->get<std::string>() + "' (use system, developer, user or assistant)", param + ".role");
  return ChatMessage{name, content_of(message, param + ".content")};
}

// The completions prompt: a string, an array holding one string, or an array of token ids.
void prompt_of(const json& body, Request& request) {
  const json* prompt = field(body, "prompt");
  require(prompt != nullptr, "'prompt' is required", "prompt");
  const json* text = prompt;
  if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) text = &(*prompt)[0];
  if (text->is_string()) {
    request.prompt_text = text->get<std::string>();
    require(!request.prompt_text.empty(), "'prompt' must not be empty", "prompt");
    return;
  }
  require(prompt->is_array() && !prompt->empty(),
          "'prompt' must be a non-empty string, one string in an array, or an array of token ids", "prompt");
  for (const json& t : *prompt) {
    require(t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
            "'prompt' must be a non-empty string, one string in an array, or an array of token ids", "prompt");
    request.prompt_tokens.push_back(t.get<int32_t>());
  }
}

}  // namespace

CompletionRequest parse_chat_request(std::string_view body_text, const ModelLimits& limits) {
  const json body = parse_body(body_text);
  CompletionRequest r = common_fields(body, Endpoint::ChatCompletions, limits);
  const json* messages = field(body, "messages");
  require(messages && messages->is_array() && !messages->empty(), "'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < messages->size(); ++i) r.engine.messages.push_back(message_of((*messages)[i], i));
  return r;
}

CompletionRequest parse_completion_request(std::string_view body_text, const ModelLimits& limits) {
  const json body = parse_body(body_text);
  CompletionRequest r = common_fields(body, Endpoint::Completions, limits);
  require(!optional_bool(body, "echo").value_or(false), "'echo' is not supported", "echo");
  if (const json* suffix = field(body, "suffix")) {
    require(suffix->is_string() && suffix->get<std::string>().empty(), "'suffix' is not supported", "suffix");
  }
  prompt_of(body, r.engine);
  return r;
}

}  // namespace kvdesk::server
