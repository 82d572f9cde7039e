// Conversations as files: Markdown of one branch (to read or share), and JSON of a whole tree
// or one branch (backups, moving between machines), which imports back into a store.
// Pure functions over plain data: no database here.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "app/store/store_types.h"

namespace kvdesk::store {

inline constexpr std::string_view kConversationFormat = "kvdesk.conversation";
inline constexpr int kConversationFormatVersion = 2;

// {"format", "version", "id", "title", "system_prompt", "created_at_ms", "updated_at_ms",
//  "active_leaf_id", "messages": [{"id", "parent_id", "role", "content", "status",
//  "created_at_ms", "updated_at_ms", "stats"?, "tokens"?: {"identity", "ids"}, and OpenAI's
//  "tool_calls"?, "tool_call_id"?, "name"?, "reasoning_content"?}], "settings"?: {"context_length",
//  "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "kv_retention", "kv_keep"; each
//  optional}}. Version 2 added role "tool" and the OpenAI fields; version 1 files import as they are.
// `tree.messages` may be the whole tree or a path. "tokens" are the message's token ids and the
// model and chat template they are valid for (store::MessageTokens), so an imported conversation
// continues token for token as it did where it was exported.
nlohmann::json conversation_to_json(const ConversationTree& tree);
// The inverse. Hostile input is expected: wrong types, unknown roles, missing parents, cycles and
// duplicate ids throw kvdesk::Error. The messages come back parents first, otherwise in file order.
ConversationTree conversation_from_json(const nlohmann::json& j);
// A file's text: kvdesk's format, or an OpenAI-shaped transcript (openai_transcript.h).
ConversationTree conversation_from_json_text(std::string_view text);

// The conversation as Markdown: the title, the system prompt, then each message of `path` under
// a heading naming its role (contents are written as they are: answers usually are Markdown),
// tool calls as fenced JSON under the answer that made them.
std::string conversation_to_markdown(const Conversation& conversation, const std::vector<Message>& path);

}  // namespace kvdesk::store
