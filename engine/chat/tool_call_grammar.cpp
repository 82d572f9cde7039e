// Tool-call grammars: GBNF that makes a model write tool calls in its template family's markup
// (the markers tool_calls.cpp parses, engine/chat/tool_call_markup.h), each call's arguments
// held to its tool's parameters schema (grammar::json_schema_gbnf). A forced call (tool_choice
// "required" or a named function) holds from the first token; a lazy one ("auto") starts at a
// trigger text the model writes.
#include "engine/chat/tool_call_grammar.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "engine/chat/tool_call_markup.h"
#include "engine/error.h"
#include "engine/grammar/json_schema.h"

namespace kvdesk {
namespace {

using json = nlohmann::ordered_json;
using namespace tool_call_markup;

// A GBNF string literal of raw text.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

// A tool's name as rule names may spell it: letters and digits, everything else '-'.
std::string rule_name(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  return out;
}

struct ToolSpec {
  std::string name;
  std::string args_rule;   // args-NAME
  json parameters;
};

std::vector<ToolSpec> chosen_tools(const json& tools, std::string_view forced_name) {
  if (!tools.is_array() || tools.empty()) throw Error("tool calls need at least one tool in \"tools\"");
  std::vector<ToolSpec> chosen;
  for (const json& tool : tools) {
    const json& function = tool.is_object() && tool.contains("function") ? tool["function"] : tool;
    if (!function.is_object() || !function.contains("name") || !function["name"].is_string() ||
        function["name"].get<std::string>().empty()) {
      throw Error("a tool without a function name: " + tool.dump());
    }
    const std::string name = function["name"];
    if (!forced_name.empty() && name != forced_name) continue;
    const auto parameters = function.find("parameters");
    chosen.push_back({name, "args-" + rule_name(name),
                      parameters == function.end() || parameters->is_null() ? json{{"type", "object"}} : *parameters});
  }
  if (chosen.empty()) throw Error("tool_choice names the function '" + std::string(forced_name) + "', not among the tools");
  return chosen;
}

// json_schema_gbnf's rules for `schema` under `name`, ending with a newline.
std::string schema_rules(const json& schema, const std::string& name) {
  std::string rules = grammar::json_schema_gbnf(schema, name);
  if (!rules.ends_with('\n')) rules += '\n';
  return rules;
}

// For the XML-style formats: the parameters one after another in the schema's order, each as
// `before KEY middle value after`, the required ones always, the others optional. A string
// parameter's value is free text without "</"; any other is its JSON.
std::string xml_arguments_gbnf(const ToolSpec& tool, std::string_view before, std::string_view middle,
                               std::string_view after) {
  const json& schema = tool.parameters;
  const json properties = schema.value("properties", json::object());
  const json required = schema.value("required", json::array());
  std::string rules, sequence;
  int index = 0;
  for (const auto& [key, property] : properties.items()) {
    const std::string value_rule = tool.args_rule + "-p" + std::to_string(index++);
    const bool text = property.is_object() && property.value("type", json()) == "string" && !property.contains("enum") &&
                      !property.contains("const");
    rules += text ? value_rule + " ::= tool-xml-text\n" : schema_rules(property, value_rule);
    const bool needed = std::find(required.begin(), required.end(), key) != required.end();
    const std::string item = literal(std::string(before) + key + std::string(middle)) + " " + value_rule + " " + literal(after);
    sequence += needed ? item + " " : "( " + item + " )? ";
  }
  return rules + tool.args_rule + " ::= " + (sequence.empty() ? "\"\"" : sequence) + "\n";
}

// One call of `tool` in the format's markup, as a GBNF sequence.
std::string call_sequence(ToolCallFormat format, const ToolSpec& tool) {
  const std::string& args = tool.args_rule;
  const std::string quoted = json(tool.name).dump();
  switch (format) {
    case ToolCallFormat::Hermes:
      return literal("<tool_call>\n{\"name\": " + quoted + ", \"arguments\": ") + " " + args + " " +
             literal("}\n</tool_call>");
    case ToolCallFormat::Qwen3Coder:
      return literal("<tool_call>\n<function=" + tool.name + ">\n") + " " + args + " " +
             literal("</function>\n</tool_call>");
    case ToolCallFormat::Glm45: return literal("<tool_call>" + tool.name + "\n") + " " + args + " " + literal("</tool_call>");
    case ToolCallFormat::Llama3Json:
      return literal("{\"name\": " + quoted + ", \"parameters\": ") + " " + args + " " + literal("}");
    case ToolCallFormat::FunctionaryV3_1:
      return literal("<function=" + tool.name + ">") + " " + args + " " + literal("</function>");
    case ToolCallFormat::FunctionaryV3_2: return literal(tool.name + "\n") + " " + args;
    case ToolCallFormat::Mistral:
      return literal("{\"name\": " + quoted + ", \"arguments\": ") + " " + args + " ( " + literal(", \"id\": \"") +
             " [a-zA-Z0-9]{9} " + literal("\"") + " )? " + literal("}");
    case ToolCallFormat::MistralArgs:
      return literal("[TOOL_CALLS]" + tool.name) + " ( " + literal("[CALL_ID]") + " [a-zA-Z0-9]{9} )? " +
             literal("[ARGS]") + " " + args;
    case ToolCallFormat::DeepSeekR1:
      return literal(std::string(kDeepSeekCallBegin) + "function" + std::string(kDeepSeekSep) + tool.name + "\n```json\n") +
             " " + args + " " + literal("\n```" + std::string(kDeepSeekCallEnd));
    case ToolCallFormat::DeepSeekV3_1:
      return literal(std::string(kDeepSeekCallBegin) + tool.name + std::string(kDeepSeekSep)) + " " + args + " " +
             literal(kDeepSeekCallEnd);
    case ToolCallFormat::KimiK2:
      return literal("<|tool_call_begin|>functions." + tool.name + ":") + " [0-9]+ " +
             literal("<|tool_call_argument_begin|>") + " " + args + " " + literal("<|tool_call_end|>");
    case ToolCallFormat::Harmony:
      return literal("<|channel|>commentary to=functions." + tool.name + " <|constrain|>json<|message|>") + " " + args;
    case ToolCallFormat::Granite:
      return literal("{\"name\": " + quoted + ", \"arguments\": ") + " " + args + " " + literal("}");
    case ToolCallFormat::CommandR:
      return literal("{\"tool_call_id\": \"") + " [0-9]+ " + literal("\", \"tool_name\": " + quoted + ", \"parameters\": ") +
             " " + args + " " + literal("}");
    case ToolCallFormat::None: break;
  }
  return {};
}

// What surrounds the calls in a format: GBNF sequences before, between and after them (""
// for none), whether there may be several, and the texts that begin a call.
struct CallFrame {
  std::string open;
  std::string between;
  std::string close;
  bool parallel = true;
  std::vector<std::string> triggers;
};

CallFrame frame_of(ToolCallFormat format, const std::vector<ToolSpec>& tools, bool lazy) {
  switch (format) {
    case ToolCallFormat::Hermes:
    case ToolCallFormat::Qwen3Coder:
    case ToolCallFormat::Glm45: return {"", literal("\n"), "", true, {std::string(kToolCallTag)}};
    case ToolCallFormat::Llama3Json: return {"( " + literal("<|python_tag|>") + " )?", "", "", false, {"{\"name\"", "<|python_tag|>"}};
    case ToolCallFormat::FunctionaryV3_1: return {"", "", "", true, {"<function="}};
    case ToolCallFormat::FunctionaryV3_2: {
      // The generation prompt may have written the first ">>>"; a trigger names the tool, as
      // ">>>all\n" begins plain content.
      CallFrame frame{lazy ? literal(">>>") : "( " + literal(">>>") + " )?", literal(">>>"), "", true, {}};
      for (const ToolSpec& tool : tools) frame.triggers.push_back(">>>" + tool.name + "\n");
      return frame;
    }
    case ToolCallFormat::Mistral: return {literal("[TOOL_CALLS]["), literal(", "), literal("]"), true, {"[TOOL_CALLS]"}};
    case ToolCallFormat::MistralArgs: return {"", "", "", true, {"[TOOL_CALLS]"}};
    case ToolCallFormat::DeepSeekR1:
      return {literal(kDeepSeekCallsBegin), "( " + literal("\n") + " )?", literal(kDeepSeekCallsEnd), true,
              {std::string(kDeepSeekCallsBegin)}};
    case ToolCallFormat::DeepSeekV3_1:
      return {literal(kDeepSeekCallsBegin), "", literal(kDeepSeekCallsEnd), true, {std::string(kDeepSeekCallsBegin)}};
    case ToolCallFormat::KimiK2:
      return {literal("<|tool_calls_section_begin|>"), "", literal("<|tool_calls_section_end|>"), true,
              {"<|tool_calls_section_begin|>"}};
    // The call ends at the arguments: <|call|> is the stop token that follows.
    case ToolCallFormat::Harmony: return {"", "", "", false, {"<|channel|>commentary to=functions."}};
    case ToolCallFormat::Granite: return {literal("<|tool_call|>["), literal(", "), literal("]"), true, {"<|tool_call|>"}};
    case ToolCallFormat::CommandR:
      return {literal("<|START_ACTION|>[\n    "), literal(",\n    "), literal("\n]<|END_ACTION|>"), true,
              {"<|START_ACTION|>"}};
    case ToolCallFormat::None: break;
  }
  throw Error("the chat template shows no tool-call format, so tool calls cannot be required");
}

bool xml_arguments(ToolCallFormat format) {
  return format == ToolCallFormat::Qwen3Coder || format == ToolCallFormat::Glm45;
}

}  // namespace

ToolCallGrammar tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools, std::string_view forced_name,
                                  bool lazy, bool parallel) {
  const std::vector<ToolSpec> chosen = chosen_tools(tools, forced_name);
  CallFrame frame = frame_of(format, chosen, lazy);
  std::string rules, alternatives;
  for (const ToolSpec& tool : chosen) {
    if (format == ToolCallFormat::Qwen3Coder) {
      rules += xml_arguments_gbnf(tool, "<parameter=", ">\n", "\n</parameter>\n");
    } else if (format == ToolCallFormat::Glm45) {
      rules += xml_arguments_gbnf(tool, "<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n");
    } else {
      rules += schema_rules(tool.parameters, tool.args_rule);
    }
    rules += "call-" + rule_name(tool.name) + " ::= " + call_sequence(format, tool) + "\n";
    alternatives += (alternatives.empty() ? "" : " | ") + ("call-" + rule_name(tool.name));
  }
  if (xml_arguments(format)) rules += "tool-xml-text ::= ( [^<] | \"<\" [^/] )*\n";
  rules += "tool-call ::= " + alternatives + "\n";
  std::string root = "root ::= " + frame.open + " tool-call";
  if (frame.parallel && parallel) root += " ( " + frame.between + " tool-call )*";
  root += " " + frame.close + "\n";
  ToolCallGrammar grammar{root + rules, {}};
  if (lazy) grammar.triggers = std::move(frame.triggers);
  return grammar;
}

}  // namespace kvdesk
