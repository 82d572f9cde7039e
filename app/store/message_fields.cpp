// Reading and writing a message's OpenAI fields (see message_fields.h).
#include "app/store/message_fields.h"

#include "app/store/bounded_json.h"
#include "engine/error.h"

namespace kvdesk::store {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error("conversation JSON: " + where + ": " + what);
}

json checked_tool_call(const json& call, const std::string& where) {
  if (!call.is_object()) bad(where, "each of 'tool_calls' must be an object");
  const auto function = call.find("function");
  if (function == call.end() || !function->is_object()) bad(where, "a tool call needs a 'function' object");
  const auto name = function->find("name");
  if (name == function->end() || !name->is_string()) bad(where, "a tool call's function needs a 'name' string");
  json out = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", "{}"}}}};
  const auto arguments = function->find("arguments");
  if (arguments != function->end() && !arguments->is_null()) {
    if (arguments->is_string()) {
      out["function"]["arguments"] = *arguments;
    } else if (arguments->is_object()) {
      out["function"]["arguments"] = arguments->dump();
    } else {
      bad(where, "a tool call's 'arguments' must be a JSON string or an object");
    }
  }
  const auto id = call.find("id");
  if (id != call.end() && !id->is_null()) {
    if (!id->is_string()) bad(where, "a tool call's 'id' must be a string");
    out["id"] = *id;
  }
  return out;
}

std::string string_or_empty(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string fields_from_message_json(const json& j, const std::string& where) {
  json fields = json::object();
  if (const auto calls = j.find("tool_calls"); calls != j.end() && !calls->is_null()) {
    if (!calls->is_array()) bad(where, "'tool_calls' must be an array");
    json checked = json::array();
    for (const json& call : *calls) checked.push_back(checked_tool_call(call, where));
    if (!checked.empty()) fields["tool_calls"] = std::move(checked);
  }
  for (const char* key : {"tool_call_id", "name", "reasoning_content"}) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) bad(where, std::string("'") + key + "' must be a string");
    if (!it->get_ref<const std::string&>().empty()) fields[key] = *it;
  }
  return fields.empty() ? std::string() : fields.dump();
}

void add_fields_to_message_json(const std::string& fields_json, json& message) {
  if (fields_json.empty()) return;
  bool too_deep = false;
  const json fields = parse_bounded_json(fields_json, too_deep);
  if (!fields.is_object()) return;
  for (const char* key : kMessageFieldKeys) {
    if (fields.contains(key)) message[key] = fields[key];
  }
}

MessageFields parse_message_fields(const std::string& fields_json) {
  MessageFields out;
  if (fields_json.empty()) return out;
  bool too_deep = false;
  const json fields = parse_bounded_json(fields_json, too_deep);
  if (!fields.is_object()) return out;
  out.tool_call_id = string_or_empty(fields, "tool_call_id");
  out.name = string_or_empty(fields, "name");
  out.reasoning = string_or_empty(fields, "reasoning_content");
  const auto calls = fields.find("tool_calls");
  if (calls == fields.end() || !calls->is_array()) return out;
  for (const json& call : *calls) {
    if (!call.is_object()) continue;
    const auto function = call.find("function");
    if (function == call.end() || !function->is_object()) continue;
    const auto arguments = function->find("arguments");
    out.tool_calls.push_back(ToolCallField{
        .id = string_or_empty(call, "id"),
        .name = string_or_empty(*function, "name"),
        .arguments = arguments == function->end() ? std::string()
                     : arguments->is_string()      ? arguments->get<std::string>()
                                                   : arguments->dump(),
    });
  }
  return out;
}

}  // namespace kvdesk::store
