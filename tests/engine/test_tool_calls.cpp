// Tool calls in answers: each format recognised from excerpts of real chat templates (the lines
// with its telltale markers), its calls taken out of answers (parallel ones, ids the format
// carries, broken calls left as content), the stream agreeing with the whole-answer parse at
// every split, and the grammars that force a call compiling with parse_gbnf.
#include <catch2/catch.hpp>

#include <random>

#include <nlohmann/json.hpp>

#include "engine/chat/tool_call_grammar.h"
#include "engine/chat/tool_calls.h"
#include "engine/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"

using kvdesk::ParsedAnswer;
using kvdesk::ToolCall;
using kvdesk::ToolCallDelta;
using kvdesk::ToolCallFormat;
using kvdesk::ToolCallStream;
using kvdesk::parse_tool_calls;
using kvdesk::tool_call_format_of;

namespace {

// Template excerpts, copied from the models' tokenizer_config.json chat_template.
struct TemplateExcerpt {
  const char* model;
  const char* source;
  ToolCallFormat format;
};

const TemplateExcerpt kTemplates[] = {
    {"Qwen3", R"({{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }})",
     ToolCallFormat::Hermes},
    {"Qwen3-Coder", R"({{- '\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call>' }})",
     ToolCallFormat::Qwen3Coder},
    {"GLM-4.5", R"({{- '<tool_call>' + tc.name -}}{% for k, v in _args.items() %}<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value>{% endfor %}</tool_call>)",
     ToolCallFormat::Glm45},
    {"Llama 3.1", R"({{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}{{- "<|python_tag|>" + tool_call.name + ".call(" }}{{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }})",
     ToolCallFormat::Llama3Json},
    {"Llama 3.2", R"({{- '<|start_header_id|>ipython<|end_header_id|>\n\n' }}{{- '{"name": "' + tool_call.name + '", ' }}{{- '"parameters": ' }})",
     ToolCallFormat::Llama3Json},
    {"Functionary v3.1", R"({{'<|start_header_id|>assistant<|end_header_id|>\n\n<function=' + tool_call['function']['name'] + '>' + tool_call['function']['arguments'] + '</function>'}})",
     ToolCallFormat::FunctionaryV3_1},
    {"Functionary v3.2", R"({{ '>>>' + tool_call['function']['name'] + '\n' + tool_call['function']['arguments'] }}{% else %}{{ '>>>all\n' + message['content'] }})",
     ToolCallFormat::FunctionaryV3_2},
    {"Mistral Nemo", R"({{- "[TOOL_CALLS][" }}{%- for tool_call in message.tool_calls %}{{- tool_call.function|tojson }})",
     ToolCallFormat::Mistral},
    {"Mistral Small 3.2", R"({{- '[TOOL_CALLS]' + tool.function.name + '[CALL_ID]' + tool.id + '[ARGS]' + arguments|tojson }})",
     ToolCallFormat::MistralArgs},
    {"DeepSeek V3", R"({{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}})",
     ToolCallFormat::DeepSeekR1},
    {"DeepSeek V3.1", R"({{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}})",
     ToolCallFormat::DeepSeekV3_1},
    {"Kimi K2", R"({{- '<|tool_calls_section_begin|>' -}}{%- for tool_call in message['tool_calls'] -%}{{- '<|tool_call_begin|>' + tool_call['id'] + '<|tool_call_argument_begin|>' + args + '<|tool_call_end|>' -}})",
     ToolCallFormat::KimiK2},
    {"gpt-oss", R"({{- "<|start|>assistant to=" }}{{- "functions." + tool_call.name + "<|channel|>commentary " }}{{- "<|message|>" }}{{- tool_call.arguments|tojson }}{{- "<|call|>" }})",
     ToolCallFormat::Harmony},
    {"Granite 3.3", R"(respond only with <|tool_call|> followed by a JSON list of tools used. {%- elif thinking %})",
     ToolCallFormat::Granite},
    {"Command R7B", R"(<|START_THINKING|>{{message.tool_plan}}<|END_THINKING|><|START_ACTION|>[)", ToolCallFormat::CommandR},
    {"ChatML", R"({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %})",
     ToolCallFormat::None},
};

// The calls without their random ids (an id the format carries stays).
struct Call {
  std::string id;
  std::string name;
  nlohmann::json arguments;
  bool operator==(const Call&) const = default;
};

std::vector<Call> comparable(const std::vector<ToolCall>& calls) {
  std::vector<Call> out;
  for (const ToolCall& call : calls) {
    out.push_back({call.id.starts_with("call_") ? "" : call.id, call.name, nlohmann::json::parse(call.arguments)});
  }
  return out;
}

// The stream's deltas assembled as an OpenAI client assembles them.
ParsedAnswer assembled(const std::vector<ToolCallDelta>& deltas) {
  ParsedAnswer answer;
  for (const ToolCallDelta& delta : deltas) {
    if (delta.index < 0) {
      answer.content += delta.content;
      continue;
    }
    if (size_t(delta.index) == answer.tool_calls.size()) answer.tool_calls.push_back({delta.id, delta.name, ""});
    REQUIRE(size_t(delta.index) == answer.tool_calls.size() - 1);
    answer.tool_calls.back().arguments += delta.arguments;
  }
  return answer;
}

ParsedAnswer streamed(ToolCallFormat format, std::string_view text, const std::vector<size_t>& cuts) {
  ToolCallStream stream(format);
  std::vector<ToolCallDelta> deltas;
  size_t from = 0;
  for (const size_t cut : cuts) {
    stream.push(text.substr(from, cut - from), deltas);
    from = cut;
  }
  stream.push(text.substr(from), deltas);
  stream.finish(deltas);
  return assembled(deltas);
}

struct Answer {
  ToolCallFormat format;
  std::string text;
};

// Answers of every format: plain, one call, parallel calls, broken calls, content around calls.
std::vector<Answer> sample_answers() {
  return {
      {ToolCallFormat::Hermes, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2.5e3, \"<tool_call>\"]}}\n</tool_call>"},
      {ToolCallFormat::Hermes, "Broken: <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }}\n</tool_call> after"},
      {ToolCallFormat::Hermes, "No tags < tool here, just <tool_ and text"},
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"\\u00e9\\\"\"}}"},
      {ToolCallFormat::Qwen3Coder, "<tool_call>\n<function=search>\n<parameter=query>\nbest pizza\nin town\n</parameter>\n<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>"},
      {ToolCallFormat::Glm45, "Sure.<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>pizza</arg_value>\n</tool_call>"},
      {ToolCallFormat::Llama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
      {ToolCallFormat::Llama3Json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}"},
      {ToolCallFormat::Llama3Json, "{\"answer\": 42} is JSON but no call"},
      {ToolCallFormat::Llama3Json, "Text first {\"name\": \"f\", \"parameters\": {}}"},
      {ToolCallFormat::FunctionaryV3_1, "Calling.<function=get_weather>{\"city\": \"Rome\"}</function><function=b>{}</function>"},
      {ToolCallFormat::FunctionaryV3_2, "all\nLet me look.>>>get_weather\n{\"city\": \"Lima\"}>>>b\n{}"},
      {ToolCallFormat::FunctionaryV3_2, "get_weather\n{\"city\": \"Lima\"}"},
      {ToolCallFormat::Mistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abcDEF123\"}, {\"name\": \"b\", \"arguments\": {}}]"},
      {ToolCallFormat::MistralArgs, "[TOOL_CALLS]get_weather[CALL_ID]Xy7abc123[ARGS]{\"city\": \"Bern\"}[TOOL_CALLS]b[ARGS]{}"},
      {ToolCallFormat::MistralArgs, "I think [TOOL_CALLS] is a marker [TOOLS] too"},
      {ToolCallFormat::DeepSeekR1, "OK<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>b\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::DeepSeekV3_1, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>b<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::KimiK2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Kyiv\"}<|tool_call_end|><|tool_calls_section_end|>"},
      {ToolCallFormat::Harmony, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Doha\"}<|call|>"},
      {ToolCallFormat::Harmony, "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello!"},
      {ToolCallFormat::Granite, "<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"x\": true}}, {\"name\": \"b\", \"arguments\": {}}]"},
      {ToolCallFormat::CommandR, "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"a\", \"parameters\": {\"x\": null}}\n]<|END_ACTION|>"},
      {ToolCallFormat::CommandR, "<|START_RESPONSE|>Plain answer.<|END_RESPONSE|>"},
      {ToolCallFormat::None, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"},
  };
}

}  // namespace

TEST_CASE("the tool-call format is recognised from the template's markers", "[engine][chat][tool_calls]") {
  for (const TemplateExcerpt& excerpt : kTemplates) {
    INFO(excerpt.model);
    CHECK(tool_call_format_of(excerpt.source) == excerpt.format);
  }
  CHECK(std::string(kvdesk::tool_call_format_name(ToolCallFormat::DeepSeekV3_1)) == "deepseek-v3.1");
}

TEST_CASE("calls are taken out of an answer, content kept around them", "[engine][chat][tool_calls]") {
  const ParsedAnswer hermes = parse_tool_calls(
      ToolCallFormat::Hermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>");
  CHECK(hermes.content == "Let me check.");
  REQUIRE(hermes.tool_calls.size() == 1);
  CHECK(hermes.tool_calls[0].name == "get_weather");
  CHECK(hermes.tool_calls[0].arguments == R"({"city":"Paris","days":2})");
  CHECK(hermes.tool_calls[0].id.size() == 29);
  CHECK(hermes.tool_calls[0].id.starts_with("call_"));

  const ParsedAnswer coder = parse_tool_calls(ToolCallFormat::Qwen3Coder, sample_answers()[5].text);
  CHECK(coder.content.empty());
  REQUIRE(coder.tool_calls.size() == 1);
  CHECK(coder.tool_calls[0].arguments == R"({"query":"best pizza\nin town","limit":5})");

  const ParsedAnswer llama = parse_tool_calls(ToolCallFormat::Llama3Json, "  {\"name\": \"f\", \"parameters\": {\"a\": 1}}");
  CHECK(llama.content.empty());
  REQUIRE(llama.tool_calls.size() == 1);
  CHECK(llama.tool_calls[0].arguments == R"({"a":1})");
  // JSON later in the answer, or JSON that is no call, is content.
  CHECK(parse_tool_calls(ToolCallFormat::Llama3Json, "Text first {\"name\": \"f\", \"parameters\": {}}").tool_calls.empty());
  CHECK(parse_tool_calls(ToolCallFormat::Llama3Json, "{\"name\": \"Bob\"}").content == "{\"name\": \"Bob\"}");

  const ParsedAnswer harmony = parse_tool_calls(ToolCallFormat::Harmony, sample_answers()[20].text);
  CHECK(harmony.content == "<|channel|>analysis<|message|>Need weather.<|end|>");
  REQUIRE(harmony.tool_calls.size() == 1);
  CHECK(harmony.tool_calls[0].name == "get_weather");
  CHECK(harmony.tool_calls[0].arguments == R"({"city":"Doha"})");

  const ParsedAnswer functionary = parse_tool_calls(ToolCallFormat::FunctionaryV3_2, sample_answers()[12].text);
  CHECK(functionary.content == "Let me look.");
  CHECK(functionary.tool_calls.size() == 2);

  const ParsedAnswer command_r = parse_tool_calls(ToolCallFormat::CommandR, "<|START_RESPONSE|>Plain answer.<|END_RESPONSE|>");
  CHECK(command_r.content == "Plain answer.");
}

TEST_CASE("parallel calls come in order, with the ids a format carries", "[engine][chat][tool_calls]") {
  const ParsedAnswer mistral = parse_tool_calls(ToolCallFormat::Mistral, sample_answers()[14].text);
  REQUIRE(mistral.tool_calls.size() == 2);
  CHECK(mistral.tool_calls[0].id == "abcDEF123");
  CHECK(mistral.tool_calls[0].arguments == R"({"x":1})");
  CHECK(mistral.tool_calls[1].name == "b");
  CHECK(mistral.tool_calls[1].id.starts_with("call_"));

  const ParsedAnswer small = parse_tool_calls(ToolCallFormat::MistralArgs, sample_answers()[15].text);
  REQUIRE(small.tool_calls.size() == 2);
  CHECK(small.tool_calls[0].id == "Xy7abc123");
  CHECK(small.tool_calls[0].name == "get_weather");
  CHECK(small.tool_calls[1].name == "b");
  CHECK(small.content.empty());

  for (const ToolCallFormat format : {ToolCallFormat::DeepSeekR1, ToolCallFormat::DeepSeekV3_1}) {
    const ParsedAnswer deepseek = parse_tool_calls(format, format == ToolCallFormat::DeepSeekR1 ? sample_answers()[17].text
                                                                                                 : sample_answers()[18].text);
    REQUIRE(deepseek.tool_calls.size() == 2);
    CHECK(deepseek.tool_calls[0].arguments == R"({"city":"Tokyo"})");
    CHECK(deepseek.tool_calls[1].name == "b");
  }

  const ParsedAnswer kimi = parse_tool_calls(ToolCallFormat::KimiK2, sample_answers()[19].text);
  REQUIRE(kimi.tool_calls.size() == 1);
  CHECK(kimi.tool_calls[0].id == "functions.get_weather:0");
  CHECK(kimi.tool_calls[0].name == "get_weather");

  CHECK(parse_tool_calls(ToolCallFormat::Granite, sample_answers()[22].text).tool_calls.size() == 2);
  CHECK(parse_tool_calls(ToolCallFormat::Hermes, sample_answers()[1].text).tool_calls.size() == 2);
}

TEST_CASE("broken calls stay content, and the closing marker may be the answer's end",
          "[engine][chat][tool_calls]") {
  const std::string broken = "Broken: <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }}\n</tool_call> after";
  const ParsedAnswer kept = parse_tool_calls(ToolCallFormat::Hermes, broken);
  CHECK(kept.content == broken);
  CHECK(kept.tool_calls.empty());
  // Cut off inside the arguments: content.
  const std::string cut = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1";
  CHECK(parse_tool_calls(ToolCallFormat::Hermes, cut).content == cut);
  // Only the closing tag missing (the stop token ended the answer): a call.
  CHECK(parse_tool_calls(ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_").tool_calls.size() == 1);
  // Not a call of this format: none.
  CHECK(parse_tool_calls(ToolCallFormat::None, sample_answers().back().text).content == sample_answers().back().text);
}

TEST_CASE("streamed calls and content equal the whole answer's at every split", "[engine][chat][tool_calls]") {
  std::mt19937 random(7);
  for (const Answer& answer : sample_answers()) {
    INFO(kvdesk::tool_call_format_name(answer.format) << ": " << answer.text);
    const ParsedAnswer whole = parse_tool_calls(answer.format, answer.text);
    const std::vector<Call> whole_calls = comparable(whole.tool_calls);
    for (size_t cut = 0; cut <= answer.text.size(); ++cut) {
      const ParsedAnswer split = streamed(answer.format, answer.text, {cut});
      CHECK(split.content == whole.content);
      CHECK(comparable(split.tool_calls) == whole_calls);
    }
    for (int round = 0; round < 30; ++round) {
      std::vector<size_t> cuts;
      for (size_t at = 0; at < answer.text.size(); at += 1 + random() % 4) cuts.push_back(at);
      const ParsedAnswer pieces = streamed(answer.format, answer.text, cuts);
      CHECK(pieces.content == whole.content);
      CHECK(comparable(pieces.tool_calls) == whole_calls);
    }
  }
}

TEST_CASE("content streams on at once unless it may begin a call", "[engine][chat][tool_calls]") {
  ToolCallStream stream(ToolCallFormat::Hermes);
  std::vector<ToolCallDelta> deltas;
  stream.push("Hello wor", deltas);
  REQUIRE(deltas.size() == 1);
  CHECK(deltas[0].content == "Hello wor");
  deltas.clear();
  stream.push("ld <tool", deltas);   // "<tool" may begin <tool_call>; the blank before it may too
  REQUIRE(deltas.size() == 1);
  CHECK(deltas[0].content == "ld");
  deltas.clear();
  stream.push("_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", deltas);
  REQUIRE(deltas.size() == 2);
  CHECK(deltas[0].index == 0);
  CHECK(deltas[0].name == "f");
  CHECK(deltas[0].id.starts_with("call_"));
  CHECK(deltas[1].index == 0);
  CHECK(deltas[1].arguments == R"({"a":1})");
  deltas.clear();
  stream.finish(deltas);
  CHECK(deltas.empty());
}

TEST_CASE("grammars that force a call compile, with args rules per tool", "[engine][chat][tool_calls]") {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city", "days"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "ping.now"}}
  ])");
  const ToolCallFormat formats[] = {
      ToolCallFormat::Hermes,          ToolCallFormat::Qwen3Coder,   ToolCallFormat::Glm45,
      ToolCallFormat::Llama3Json,      ToolCallFormat::FunctionaryV3_1, ToolCallFormat::FunctionaryV3_2,
      ToolCallFormat::Mistral,         ToolCallFormat::MistralArgs,  ToolCallFormat::DeepSeekR1,
      ToolCallFormat::DeepSeekV3_1,    ToolCallFormat::KimiK2,       ToolCallFormat::Harmony,
      ToolCallFormat::Granite,         ToolCallFormat::CommandR,
  };
  for (const ToolCallFormat format : formats) {
    for (const bool lazy : {false, true}) {
      INFO(kvdesk::tool_call_format_name(format) << (lazy ? " lazy" : ""));
      const kvdesk::ToolCallGrammar grammar = kvdesk::tool_call_grammar(format, tools, "", lazy);
      INFO(grammar.gbnf);
      CHECK_NOTHROW(kvdesk::grammar::parse_gbnf(grammar.gbnf));
      CHECK(grammar.gbnf.find("args-get-weather ::=") != std::string::npos);
      CHECK(grammar.gbnf.find("args-ping-now ::=") != std::string::npos);
      CHECK(grammar.triggers.empty() == !lazy);
    }
  }
  const kvdesk::ToolCallGrammar forced = kvdesk::tool_call_grammar(ToolCallFormat::Hermes, tools, "ping.now", false);
  CHECK(forced.gbnf.find("args-get-weather") == std::string::npos);
  CHECK(forced.gbnf.find("\"<tool_call>\\n{\\\"name\\\": \\\"ping.now\\\", \\\"arguments\\\": \"") != std::string::npos);
  CHECK_THROWS_AS(kvdesk::tool_call_grammar(ToolCallFormat::Hermes, tools, "nope", false), kvdesk::Error);
  CHECK_THROWS_AS(kvdesk::tool_call_grammar(ToolCallFormat::None, tools, "", false), kvdesk::Error);
  CHECK(kvdesk::tool_call_grammar(ToolCallFormat::Hermes, tools, "", true).triggers ==
        std::vector<std::string>{"<tool_call>"});
}

TEST_CASE("a grammar without parallel calls takes one call, with them several", "[engine][chat][tool_calls]") {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}])");
  const std::string one = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  const auto accepts = [](const std::string& gbnf, const std::string& text) {
    const auto table = std::make_shared<const kvdesk::grammar::TokenTable>(std::vector<std::string>{text, ""}, std::vector<int32_t>{1});
    kvdesk::grammar::GrammarMatcher matcher{kvdesk::grammar::parse_gbnf(gbnf), table};
    if (!matcher.allows(0)) return false;
    matcher.accept(0);
    return matcher.can_end();
  };
  const std::string single = kvdesk::tool_call_grammar(ToolCallFormat::Hermes, tools, "ping", false, false).gbnf;
  const std::string many = kvdesk::tool_call_grammar(ToolCallFormat::Hermes, tools, "ping", false, true).gbnf;
  CHECK(accepts(single, one));
  CHECK_FALSE(accepts(single, one + "\n" + one));
  CHECK(accepts(many, one + "\n" + one));
}
