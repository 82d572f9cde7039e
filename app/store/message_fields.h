// A message's OpenAI fields beyond role and content (Message::fields_json), read and written:
// an answer's tool_calls and reasoning_content, a tool result's tool_call_id and name. The store
// keeps them as one JSON object's text; exported JSON carries them as the message's own fields,
// as OpenAI's messages do, so a transcript moves between kvdesk and other tools unchanged.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kvdesk::store {

// One call an answer made. arguments: the JSON text the model wrote (OpenAI sends a string).
struct ToolCallField {
  std::string id;
  std::string name;
  std::string arguments;
};

struct MessageFields {
  std::vector<ToolCallField> tool_calls;
  std::string tool_call_id;   // a tool result: the call it answers
  std::string name;           // a tool result: the function's name
  std::string reasoning;      // reasoning_content
};

// The keys of an OpenAI message that become fields (the others stay role and content).
inline constexpr const char* kMessageFieldKeys[] = {"tool_calls", "tool_call_id", "name", "reasoning_content"};

// The fields of an imported OpenAI-shaped message `j` as the object's text ("" when it has none).
// Checks their types (tool_calls: an array of {"id"?, "type"?, "function": {"name", "arguments"}},
// arguments a string or an object; the others strings) and throws kvdesk::Error naming `where`.
std::string fields_from_message_json(const nlohmann::json& j, const std::string& where);

// Copies the stored fields into an exported message object.
void add_fields_to_message_json(const std::string& fields_json, nlohmann::json& message);

// The stored fields for display. Never throws: text that is not an object of the expected
// shape (a damaged row) gives what could be read.
MessageFields parse_message_fields(const std::string& fields_json);

}  // namespace kvdesk::store
