// The server's pure parts in process: stop strings across token borders, OpenAI request
// parsing into engine Requests, the error JSON shape, and a reasoning model's answer in
// reasoning_content beside content.
#include <catch2/catch.hpp>

#include <algorithm>

#include "app/server/api_error.h"
#include "app/server/openai_request.h"
#include "app/server/openai_response.h"
#include "app/server/stop_scanner.h"

using namespace kvdesk;
using namespace kvdesk::server;

namespace {

const ModelLimits kLimits{512, 512};

// The param of the ApiError that parsing body throws.
std::string refused_param(const std::string& body) {
  try {
    parse_chat_request(body, kLimits);
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    const nlohmann::json param = e.to_json()["error"]["param"];
    return param.is_null() ? "" : param.get<std::string>();
  }
  FAIL("accepted: " << body);
  return {};
}

}  // namespace

TEST_CASE("a stop string split over pieces is held back and cut", "[app][serve_parsing]") {
  StopScanner s({"END", "xyz"});
  CHECK(s.feed("Hello E") == "Hello ");   // "E" may begin "END"
  CHECK(s.feed("N") == "");
  CHECK(s.feed("Dless") == "");
  CHECK(s.stopped());
  CHECK(s.feed("more") == "");
  CHECK(s.flush() == "");
}

TEST_CASE("held-back text that turns out not to stop is handed out, the rest at the end", "[app][serve_parsing]") {
  StopScanner s({"END"});
  CHECK(s.feed("an E") == "an ");
  CHECK(s.feed("Nigma") == "ENigma");
  CHECK(s.feed(" E") == " ");
  CHECK(!s.stopped());
  CHECK(s.flush() == "E");
}

TEST_CASE("the earliest of several stop strings wins, within one piece", "[app][serve_parsing]") {
  StopScanner s({"cd", "b"});
  CHECK(s.feed("abcd") == "a");
  CHECK(s.stopped());
  StopScanner none({});
  CHECK(none.feed("abc") == "abc");
}

TEST_CASE("a chat body becomes messages, sampling and stop strings", "[app][serve_parsing]") {
  const CompletionRequest r = parse_chat_request(R"({
      "model": "m", "messages": [{"role": "developer", "content": "be brief"},
                                 {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}],
      "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1, "seed": 7, "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "max_completion_tokens": 9999, "stop": "###", "stream": true,
      "stream_options": {"include_usage": true}, "user": "ignored"})",
                                                 kLimits);
  REQUIRE(r.engine.messages.size() == 2);
  CHECK(r.engine.messages[0].role == "system");
  CHECK(r.engine.messages[1].content == "hi there");
  CHECK(r.engine.sampling.temperature == 0.5f);
  CHECK(r.engine.sampling.top_p == 0.9f);
  CHECK(r.engine.sampling.top_k == 40);
  CHECK(r.engine.sampling.min_p == 0.1f);
  CHECK(r.engine.sampling.seed == 7);
  CHECK(r.engine.sampling.presence_penalty == 0.5f);
  CHECK(r.engine.sampling.frequency_penalty == -0.5f);
  CHECK(r.engine.max_tokens == 512);   // capped at the context
  CHECK(r.stop == std::vector<std::string>{"###"});
  CHECK(r.stream);
  CHECK(r.include_usage);
}

TEST_CASE("defaults follow OpenAI: temperature 1, max tokens up to the context", "[app][serve_parsing]") {
  const CompletionRequest r = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "temperature": null})", kLimits);
  CHECK(r.engine.sampling.temperature == 1.0f);
  CHECK(r.engine.max_tokens == 512);
  CHECK(!r.stream);
}

TEST_CASE("a completions prompt is text, one text in an array, or token ids", "[app][serve_parsing]") {
  CHECK(parse_completion_request(R"({"prompt": "Once"})", kLimits).engine.prompt_text == "Once");
  CHECK(parse_completion_request(R"({"prompt": ["Once"]})", kLimits).engine.prompt_text == "Once");
  CHECK(parse_completion_request(R"({"prompt": [1, 403]})", kLimits).engine.prompt_tokens == std::vector<int32_t>{1, 403});
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt": ["a", "b"]})", kLimits), ApiError);
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt": [-1]})", kLimits), ApiError);
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt": ""})", kLimits), ApiError);
  CHECK(parse_completion_request(R"({"prompt": "x", "echo": true})", kLimits).echo);
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt": [1, 2], "echo": true})", kLimits), ApiError);
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt": "x", "echo": true, "logprobs": 2})", kLimits), ApiError);
  CHECK(parse_completion_request(R"({"prompt": "x", "logprobs": 3})", kLimits).engine.top_logprobs == 3);
  CHECK_THROWS_AS(parse_completion_request(R"({"prompt": "x", "logprobs": 6})", kLimits), ApiError);
}

TEST_CASE("bad chat bodies are refused naming the field", "[app][serve_parsing]") {
  CHECK(refused_param("nope") == "");
  CHECK(refused_param("{}") == "messages");
  CHECK(refused_param(R"({"messages": [{"role": "robot", "content": "x"}]})") == "messages[0].role");
  CHECK(refused_param(R"({"messages": [{"role": "assistant", "tool_calls": {}}]})") == "messages[0].tool_calls");
  CHECK(refused_param(R"({"messages": [{"role": "user", "content": 5}]})") == "messages[0].content");
  CHECK(refused_param(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})") == "messages[0].content");
  const std::string hi = R"("messages": [{"role": "user", "content": "hi"}])";
  CHECK(refused_param("{" + hi + R"(, "seed": "x"})") == "seed");
  CHECK(refused_param("{" + hi + R"(, "top_k": -2})") == "top_k");
  CHECK(refused_param("{" + hi + R"(, "min_p": 1})") == "min_p");
  CHECK(refused_param("{" + hi + R"(, "frequency_penalty": 2.5})") == "frequency_penalty");
  CHECK(refused_param("{" + hi + R"(, "max_tokens": 18446744073709551615})") == "max_tokens");
  CHECK(refused_param("{" + hi + R"(, "stop": ["a", ""]})") == "stop");
  CHECK(refused_param("{" + hi + R"(, "stream_options": 1})") == "stream_options");
  CHECK(refused_param("{" + hi + R"(, "top_logprobs": 3})") == "top_logprobs");
  CHECK(refused_param("{" + hi + R"(, "logprobs": true, "top_logprobs": 21})") == "top_logprobs");
  CHECK(refused_param("{" + hi + R"(, "n": 0})") == "n");
  CHECK(refused_param("{" + hi + R"(, "n": 17})") == "n");
  CHECK(refused_param("{" + hi + R"(, "tools": [{"type": "function"}]})") == "tools[0]");
  CHECK(refused_param("{" + hi + R"(, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})") == "tool_choice");
  CHECK(refused_param("{" + hi + R"(, "functions": [{"name": "f"}]})") == "functions");
  CHECK(refused_param("{" + hi + R"(, "parallel_tool_calls": "no"})") == "parallel_tool_calls");
  CHECK(refused_param("{" + hi + R"(, "response_format": {"type": "xml"}})") == "response_format");
  CHECK(refused_param("{" + hi + R"(, "response_format": "text"})") == "response_format");
  CHECK(refused_param("{" + hi + R"(, "response_format": {"typ": "json_object"}})") == "response_format");
  CHECK(refused_param("{" + hi + R"(, "grammar": "root ::= [a"})") == "grammar");
  CHECK(refused_param("{" + hi + R"(, "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})") == "grammar");
  CHECK(refused_param("{" + hi + R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a+"}}}})") ==
        "response_format.json_schema.schema");
  CHECK_NOTHROW(parse_chat_request("{" + hi + R"(, "response_format": {"type": "text"}, "user": "u", "metadata": {"a": "b"}})", kLimits));
  CHECK(refused_param("{" + hi + R"(, "model": 3})") == "model");
  CHECK(refused_param("{" + hi + R"(, "logit_bias": [1]})") == "logit_bias");
  CHECK(refused_param("{" + hi + R"(, "logit_bias": {"abc": 1}})") == "logit_bias");
  CHECK(refused_param("{" + hi + R"(, "logit_bias": {"512": 1}})") == "logit_bias");
  CHECK(refused_param("{" + hi + R"(, "logit_bias": {"-3": 1}})") == "logit_bias");
  CHECK(refused_param("{" + hi + R"(, "logit_bias": {"7": 101}})") == "logit_bias");
  CHECK(refused_param("{" + hi + R"(, "logit_bias": {"7": "x"}})") == "logit_bias");
}

TEST_CASE("logit_bias maps token ids to biases for the sampler", "[app][serve_parsing]") {
  const CompletionRequest r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"13": -100, "0": 2.5, "511": 100}})", kLimits);
  using Bias = std::pair<int32_t, float>;
  std::vector<Bias> biases = r.engine.sampling.logit_bias;
  std::sort(biases.begin(), biases.end());
  CHECK(biases == std::vector<Bias>{{0, 2.5f}, {13, -100.0f}, {511, 100.0f}});
  CHECK(parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "logit_bias": null})", kLimits)
            .engine.sampling.logit_bias.empty());
}

TEST_CASE("the error JSON has OpenAI's four fields, null when absent", "[app][serve_parsing]") {
  const nlohmann::json j = ApiError(503, "busy", "server_error").to_json();
  CHECK(j["error"]["message"] == "busy");
  CHECK(j["error"]["type"] == "server_error");
  CHECK(j["error"]["param"].is_null());
  CHECK(j["error"]["code"].is_null());
  CHECK(json_body(nlohmann::json(std::string("\xff"))) == "\"\xEF\xBF\xBD\"");   // invalid UTF-8 -> U+FFFD
}

TEST_CASE("a chat answer's reasoning goes in reasoning_content, whole or streamed", "[app][serve_parsing]") {
  const Usage usage{5, 7, 0};
  const ResponseShape harmony(Endpoint::ChatCompletions, "m");
  const nlohmann::json whole = harmony.full(
      {{"<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>4", "stop", {}}}, usage);
  CHECK(whole["choices"][0]["message"]["content"] == "4");
  CHECK(whole["choices"][0]["message"]["reasoning_content"] == "Add them.");
  // DeepSeek R1's prompt opened <think>: the answer's text starts inside it.
  const ResponseShape r1(Endpoint::ChatCompletions, "m", true);
  const nlohmann::json opened = r1.full({{"Add them.\n</think>\n\n4", "stop", {}}}, usage);
  CHECK(opened["choices"][0]["message"]["content"] == "4");
  CHECK(opened["choices"][0]["message"]["reasoning_content"] == "Add them.");
  // An answer without reasoning stays as it is, with no reasoning_content.
  const nlohmann::json plain = harmony.full({{"  Once upon a time", "length", {}}}, usage);
  CHECK(plain["choices"][0]["message"]["content"] == "  Once upon a time");
  CHECK_FALSE(plain["choices"][0]["message"].contains("reasoning_content"));
  // Streamed: each chunk's delta carries what its piece added, apart.
  ChoiceStream stream = r1.choice_stream();
  const std::vector<nlohmann::json> first = r1.piece(stream, 0, "Add", {});
  REQUIRE(first.size() == 1);
  CHECK(first[0]["choices"][0]["delta"]["reasoning_content"] == "Add");
  CHECK_FALSE(first[0]["choices"][0]["delta"].contains("content"));
  r1.piece(stream, 0, " them.\n", {});
  const std::vector<nlohmann::json> answer = r1.piece(stream, 0, "</think>\n\n4", {});
  REQUIRE(answer.size() == 1);
  CHECK(answer[0]["choices"][0]["delta"]["content"] == "4");
  CHECK_FALSE(answer[0]["choices"][0]["delta"].contains("reasoning_content"));
  // Completions keep the text as written.
  CHECK(ResponseShape(Endpoint::Completions, "m").full({{"<think>x</think>y", "stop", {}}}, usage)["choices"][0]["text"] ==
        "<think>x</think>y");
}

TEST_CASE("n answers are choices with their own index, and usage counts the prompt once", "[app][serve_parsing]") {
  const nlohmann::json whole =
      ResponseShape(Endpoint::ChatCompletions, "m").full({{"a", "stop", {}}, {"b", "length", {}}}, Usage{9, 4, 0});
  REQUIRE(whole["choices"].size() == 2);
  CHECK(whole["choices"][1]["index"] == 1);
  CHECK(whole["choices"][1]["message"]["content"] == "b");
  CHECK(whole["choices"][1]["finish_reason"] == "length");
  CHECK(whole["usage"]["total_tokens"] == 13);
}

TEST_CASE("logprobs take each endpoint's OpenAI shape", "[app][serve_parsing]") {
  const std::vector<LogprobEntry> entries = {{"Hi", -0.5f, {{7, -0.5f, "Hi"}, {9, -1.5f, "\xE2"}}}};
  const nlohmann::json chat =
      ResponseShape(Endpoint::ChatCompletions, "m", false, ToolCallFormat::None, true).full({{"Hi", "stop", entries}}, {});
  const nlohmann::json& c = chat["choices"][0]["logprobs"]["content"][0];
  CHECK(c["token"] == "Hi");
  CHECK(c["logprob"] == Approx(-0.5));
  CHECK(c["bytes"] == nlohmann::json::array({72, 105}));
  REQUIRE(c["top_logprobs"].size() == 2);
  CHECK(c["top_logprobs"][1]["bytes"] == nlohmann::json::array({0xE2}));
  const nlohmann::json legacy =
      ResponseShape(Endpoint::Completions, "m", false, ToolCallFormat::None, true).full({{"Hi", "stop", entries}}, {});
  CHECK(legacy["choices"][0]["logprobs"]["tokens"] == nlohmann::json::array({"Hi"}));
  CHECK(legacy["choices"][0]["logprobs"]["top_logprobs"][0]["Hi"] == Approx(-0.5));
  CHECK(ResponseShape(Endpoint::ChatCompletions, "m").full({{"Hi", "stop", {}}}, {})["choices"][0]["logprobs"].is_null());
}

TEST_CASE("a streamed choice's chunks join into the message the client got, tool call ids included", "[app][serve_parsing]") {
  using nlohmann::json;
  StreamedMessage joined(0);
  const auto delta = [](int index, json d) { return json{{"choices", {{{"index", index}, {"delta", std::move(d)}}}}}; };
  joined.add(delta(0, {{"role", "assistant"}, {"content", ""}}));
  joined.add(delta(0, {{"reasoning_content", "Think"}}));
  joined.add(delta(0, {{"reasoning_content", "ing."}}));
  joined.add(delta(0, {{"content", "Let me look."}}));
  joined.add(delta(1, {{"content", "another choice"}}));
  joined.add(delta(0, {{"tool_calls", {{{"index", 0}, {"id", "call_x"}, {"type", "function"},
                                        {"function", {{"name", "get"}, {"arguments", ""}}}}}}}));
  joined.add(delta(0, {{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"a\":"}}}}}}}));
  joined.add(delta(0, {{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "1}"}}}}}}}));
  joined.add(json{{"choices", json::array()}, {"usage", {{"prompt_tokens", 3}}}});
  const json& m = joined.message();
  CHECK(m["content"] == "Let me look.");
  CHECK(m["reasoning_content"] == "Thinking.");
  REQUIRE(m["tool_calls"].size() == 1);
  CHECK(m["tool_calls"][0]["id"] == "call_x");
  CHECK(m["tool_calls"][0]["function"]["name"] == "get");
  CHECK(m["tool_calls"][0]["function"]["arguments"] == "{\"a\":1}");
  const ChatMessage chat = chat_message_of(m);
  CHECK(chat.content == "Let me look.");
  CHECK(json::parse(chat.fields_json)["tool_calls"][0]["id"] == "call_x");
}
