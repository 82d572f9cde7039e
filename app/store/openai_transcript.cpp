// Importing an OpenAI-shaped transcript (see openai_transcript.h).
#include "app/store/openai_transcript.h"

#include "app/store/message_fields.h"
#include "engine/error.h"

namespace kvdesk::store {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error("OpenAI messages: " + where + ": " + what);
}

const json& messages_of(const json& j) {
  if (j.is_array()) return j;
  const auto it = j.find("messages");
  if (it == j.end() || !it->is_array()) bad("top level", "'messages' must be an array");
  return *it;
}

// OpenAI's roles as kvdesk's: developer is the newer name of system, function the older one of tool.
Role role_of(const json& message, const std::string& where) {
  const auto it = message.find("role");
  if (it == message.end() || !it->is_string()) bad(where, "'role' must be a string");
  const std::string& name = it->get_ref<const std::string&>();
  if (name == "developer") return Role::System;
  if (name == "function") return Role::Tool;
  const std::optional<Role> role = parse_role(name);
  if (!role) bad(where, "unknown role '" + name + "' (system, developer, user, assistant or tool)");
  return *role;
}

std::string content_of(const json& message, const std::string& where) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) bad(where, "'content' must be a string, null or an array of parts");
  std::string text;
  for (const json& part : *it) {
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string()
                                 ? part["type"].get<std::string>() : std::string();
    if (type != "text" || !part.contains("text") || !part["text"].is_string()) {
      bad(where, "a content part of type '" + type + "' cannot be imported: kvdesk's chats hold text only");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

bool is_openai_transcript(const json& j) {
  return j.is_array() || (j.is_object() && !j.contains("format") && j.contains("messages"));
}

ConversationTree conversation_from_openai_transcript(const json& j) {
  const json& messages = messages_of(j);
  ConversationTree tree;
  size_t i = 0;
  for (; i < messages.size(); ++i) {
    const std::string where = "message #" + std::to_string(i);
    if (!messages[i].is_object()) bad(where, "must be an object");
    if (role_of(messages[i], where) != Role::System) break;
    const std::string text = content_of(messages[i], where);
    tree.conversation.system_prompt += (tree.conversation.system_prompt.empty() ? "" : "\n\n") + text;
  }
  for (; i < messages.size(); ++i) {
    const std::string where = "message #" + std::to_string(i);
    if (!messages[i].is_object()) bad(where, "must be an object");
    Message m;
    m.id = MessageId(tree.messages.size() + 1);
    if (!tree.messages.empty()) m.parent_id = tree.messages.back().id;
    m.role = role_of(messages[i], where);
    m.content = content_of(messages[i], where);
    m.fields_json = fields_from_message_json(messages[i], where);
    if (m.role == Role::User && tree.conversation.title.empty()) tree.conversation.title = title_from(m.content);
    tree.messages.push_back(std::move(m));
  }
  if (tree.messages.empty()) bad("top level", "no messages besides the system prompt");
  if (tree.conversation.title.empty()) tree.conversation.title = kNewChatTitle;
  tree.conversation.active_leaf_id = tree.messages.back().id;
  return tree;
}

}  // namespace kvdesk::store
