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
#include "engine/chat/tool_call_grammar.h"
#include "engine/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/json_schema.h"

namespace kvdesk::server {
namespace {

// Ordered: a JSON schema's properties are generated in the order the client listed them.
using json = nlohmann::ordered_json;

// Deeper bodies are refused before anything reads them (no request needs more than 4).
constexpr int kMaxNesting = 32;
constexpr size_t kMaxStops = 16;
constexpr size_t kMaxLogitBiases = 1024;
constexpr int64_t kMaxTopLogprobs = 20;
constexpr int64_t kMaxCompletionLogprobs = 5;
constexpr size_t kMaxTools = 128;

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

// n: how many answers (choices) to sample from the one prompt.
int32_t samples_of(const json& body) {
  const std::optional<int64_t> n = optional_integer(body, "n");
  if (!n) return 1;
  require(*n >= 1 && *n <= kMaxSamples, "'n' must be from 1 to " + std::to_string(kMaxSamples), "n");
  return int32_t(*n);
}

// Chat's logprobs (true/false) with top_logprobs (0-20): -1 when not asked for.
int32_t chat_top_logprobs(const json& body) {
  const bool asked = optional_bool(body, "logprobs").value_or(false);
  const std::optional<int64_t> top = optional_integer(body, "top_logprobs");
  if (!top) return asked ? 0 : -1;
  require(*top >= 0 && *top <= kMaxTopLogprobs, "'top_logprobs' must be from 0 to " + std::to_string(kMaxTopLogprobs),
          "top_logprobs");
  require(asked, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
  return int32_t(*top);
}

// The legacy completions' logprobs: the number of alternatives (0-5); -1 when absent.
int32_t completion_top_logprobs(const json& body) {
  const json* v = field(body, "logprobs");
  if (!v) return -1;
  if (v->is_boolean()) return v->get<bool>() ? 0 : -1;
  const std::optional<int64_t> top = optional_integer(body, "logprobs");
  require(*top >= 0 && *top <= kMaxCompletionLogprobs,
          "'logprobs' must be from 0 to " + std::to_string(kMaxCompletionLogprobs), "logprobs");
  return int32_t(*top);
}

// A grammar's text compiled; what kvdesk cannot compile is a 400 naming the field.
std::shared_ptr<const grammar::Grammar> compiled(const std::string& gbnf, const std::string& param) {
  try {
    return grammar::parse_gbnf(gbnf);
  } catch (const Error& e) {
    throw invalid_request(std::string("'") + param + "': " + e.what(), param);
  }
}

std::string schema_grammar(const json& schema, const std::string& param) {
  require(schema.is_object() || schema.is_boolean(), "'" + param + "' must be a JSON schema object", param);
  try {
    return grammar::json_schema_gbnf(schema);
  } catch (const Error& e) {
    throw invalid_request(std::string("'") + param + "': " + e.what(), param);
  }
}

// response_format: text (free), json_object (any object; llama-server's optional schema), or
// json_schema ({"json_schema": {"name", "schema", "strict"}}); "" for free text.
std::string response_format_grammar(const json& body) {
  const json* format = field(body, "response_format");
  if (!format) return {};
  const json* type_field = format->is_object() ? field(*format, "type") : nullptr;
  require(type_field && type_field->is_string(), "'response_format' must be an object with a 'type'", "response_format");
  const std::string type = type_field->get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") {
    const json* schema = field(*format, "schema");
    return schema ? schema_grammar(*schema, "response_format.schema") : grammar::json_object_gbnf();
  }
  require(type == "json_schema", "'response_format.type' must be text, json_object or json_schema", "response_format");
  const json* spec = field(*format, "json_schema");
  require(spec && spec->is_object(), "'response_format.json_schema' must be an object with a 'schema'",
          "response_format.json_schema");
  const json* schema = field(*spec, "schema");
  return schema ? schema_grammar(*schema, "response_format.json_schema.schema") : grammar::json_object_gbnf();
}

// The answer's grammar from response_format, or llama-server's `grammar` (GBNF text) and
// `json_schema`: at most one of them.
OutputConstraint output_constraint(const json& body) {
  std::vector<std::pair<std::string, std::string>> asked;   // (param, gbnf)
  if (std::string g = response_format_grammar(body); !g.empty()) asked.emplace_back("response_format", std::move(g));
  if (const json* g = field(body, "grammar")) {
    require(g->is_string(), "'grammar' must be a string of GBNF rules", "grammar");
    asked.emplace_back("grammar", g->get<std::string>());
  }
  if (const json* schema = field(body, "json_schema")) asked.emplace_back("json_schema", schema_grammar(*schema, "json_schema"));
  if (asked.size() > 1) throw invalid_request("give one of 'response_format', 'grammar' and 'json_schema'", asked[1].first);
  OutputConstraint c;
  if (!asked.empty()) c.grammar = compiled(asked[0].second, asked[0].first);
  return c;
}

// tools: [{"type": "function", "function": {"name", "description", "parameters"}}]; each name
// once, as the tool-call grammars and parsers need.
std::vector<std::string> tool_names_of(const json& tools) {
  require(tools.is_array(), "'tools' must be an array of function tools", "tools");
  require(tools.size() <= kMaxTools, "'tools' has more than " + std::to_string(kMaxTools) + " tools", "tools");
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string param = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    require(t.is_object() && t.value("type", json()) == "function" && t.contains("function") && t["function"].is_object(),
            "each tool must be {\"type\": \"function\", \"function\": {...}}", param);
    const json& f = t["function"];
    require(f.contains("name") && f["name"].is_string() && !f["name"].get<std::string>().empty(),
            "each function needs a non-empty string 'name'", param + ".function.name");
    const json* parameters = field(f, "parameters");
    require(!parameters || parameters->is_object(), "a function's 'parameters' must be a JSON schema object",
            param + ".function.parameters");
    const std::string name = f["name"].get<std::string>();
    require(std::find(names.begin(), names.end(), name) == names.end(), "the tool '" + name + "' is given twice", param);
    names.push_back(name);
  }
  return names;
}

// tool_choice: "none", "auto" (the default), "required", or {"type": "function", "function":
// {"name"}}; returns the choice's word and, for a named function, its name.
std::pair<std::string, std::string> tool_choice_of(const json& body, const std::vector<std::string>& names) {
  const json* choice = field(body, "tool_choice");
  if (!choice) return {"auto", ""};
  if (choice->is_string()) {
    const std::string word = choice->get<std::string>();
    require(word == "none" || word == "auto" || word == "required",
            "'tool_choice' must be none, auto, required or a named function", "tool_choice");
    return {word, ""};
  }
  require(choice->is_object() && choice->contains("function") && (*choice)["function"].is_object() &&
              (*choice)["function"].value("name", json()).is_string(),
          "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
          "tool_choice");
  const std::string name = (*choice)["function"]["name"].get<std::string>();
  require(std::find(names.begin(), names.end(), name) != names.end(), "'tool_choice' names '" + name + "', not one of the tools",
          "tool_choice");
  return {"function", name};
}

// Tools go to the chat template, and the answer's calls are parsed in the template family's
// markup. "auto" lets the model choose; a call it begins is held to its tool's parameters
// from the markup on (a lazy grammar; where a schema is beyond the grammar compiler the call
// is only parsed). "required" and a named function force a call from the first token.
// parallel_tool_calls false (OpenAI's default: true) holds the grammar to one call.
void add_tools(const json& body, CompletionRequest& r, const ModelLimits& limits) {
  require(!field(body, "functions"), "'functions' is the deprecated form: send 'tools'", "functions");
  const json* tools = field(body, "tools");
  const json* parallel = field(body, "parallel_tool_calls");
  require(!parallel || parallel->is_boolean(), "'parallel_tool_calls' must be true or false", "parallel_tool_calls");
  if (!tools || tools->empty()) return;
  const std::vector<std::string> names = tool_names_of(*tools);
  const auto [choice, forced_name] = tool_choice_of(body, names);
  if (choice == "none") return;
  r.engine.tools_json = tools->dump();
  const ToolCallFormat format = tool_call_format_of(limits.chat_template_source);
  const bool forced = choice != "auto";
  require(!forced || format != ToolCallFormat::None,
          "this model's chat template writes no tool-call markup kvdesk knows, so a call cannot be forced",
          "tool_choice");
  if (format == ToolCallFormat::None) return;
  r.tool_format = format;
  r.engine.print_control_tokens = true;
  require(!r.engine.constraint.active(), "'tools' with a forced or lazy call cannot be combined with a response format",
          "response_format");
  try {
    const ToolCallGrammar g = tool_call_grammar(format, *tools, forced_name, !forced, !parallel || parallel->get<bool>());
    r.engine.constraint.grammar = grammar::parse_gbnf(g.gbnf);
    r.engine.constraint.triggers = forced ? std::vector<std::string>() : g.triggers;
  } catch (const Error& e) {
    require(!forced, std::string("a tool's parameters: ") + e.what(), "tools");
    r.engine.constraint = OutputConstraint();
  }
}

// Fields both endpoints share: sampling, length, stop strings, streaming.
CompletionRequest common_fields(const json& body, Endpoint endpoint, const ModelLimits& limits) {
  if (const json* model = field(body, "model")) require(model->is_string(), "'model' must be a string", "model");
  CompletionRequest r;
  r.endpoint = endpoint;
  r.engine.sampling = sampling_of(body, limits);
  r.engine.samples = samples_of(body);
  r.engine.constraint = output_constraint(body);
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

// A message: its role and text, and its other fields (an answer's tool_calls, a tool result's
// tool_call_id and name, reasoning_content) kept as JSON for the template.
ChatMessage message_of(const json& message, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "]";
  require(message.is_object(), "each message must be an object", param);
  const json* role = field(message, "role");
  require(role && role->is_string(), "each message needs a string 'role'", param + ".role");
  std::string name = role->get<std::string>();
  if (name == "developer") name = "system";
  require(name == "system" || name == "user" || name == "assistant" || name == "tool",
          "unsupported role '" + role->get<std::string>() + "' (use system, developer, user, assistant or tool)",
          param + ".role");
  ChatMessage m{name, content_of(message, param + ".content"), ""};
  json fields = json::object();
  for (const char* key : {"tool_calls", "tool_call_id", "name", "reasoning_content"}) {
    if (const json* v = field(message, key)) fields[key] = *v;
  }
  if (const json* calls = field(fields, "tool_calls")) {
    require(calls->is_array(), "'tool_calls' must be an array", param + ".tool_calls");
  }
  if (!fields.empty()) m.fields_json = fields.dump();
  return m;
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
  r.engine.top_logprobs = chat_top_logprobs(body);
  if (const json* kwargs = field(body, "chat_template_kwargs")) {
    require(kwargs->is_object(), "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    r.engine.template_kwargs_json = kwargs->dump();
  }
  add_tools(body, r, limits);
  return r;
}

CompletionRequest parse_completion_request(std::string_view body_text, const ModelLimits& limits) {
  const json body = parse_body(body_text);
  CompletionRequest r = common_fields(body, Endpoint::Completions, limits);
  r.engine.top_logprobs = completion_top_logprobs(body);
  r.echo = optional_bool(body, "echo").value_or(false);
  require(!r.echo || r.engine.top_logprobs < 0, "'echo' with 'logprobs' is not supported (the prompt's tokens are not scored)",
          "echo");
  if (const json* suffix = field(body, "suffix")) {
    require(suffix->is_string() && suffix->get<std::string>().empty(), "'suffix' is not supported", "suffix");
  }
  prompt_of(body, r.engine);
  require(!r.echo || !r.engine.prompt_text.empty(), "'echo' needs the prompt as text, not token ids", "echo");
  return r;
}

}  // namespace kvdesk::server
