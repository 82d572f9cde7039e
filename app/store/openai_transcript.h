// An OpenAI-shaped transcript as a conversation: what agents and other clients log or send (a
// chat completions request body, {"messages": [...], ...}, or the bare messages array) imported
// as one branch, tool calls and tool results included. Pure functions over plain data.
#pragma once
#include <nlohmann/json.hpp>

#include "app/store/store_types.h"

namespace kvdesk::store {

// True when `j` looks like a transcript rather than kvdesk's own format (no "format" field).
bool is_openai_transcript(const nlohmann::json& j);

// The transcript's leading system (or developer) messages become the system prompt, the rest one
// branch of messages with ids 1, 2, ...; the title is the first user message's first line.
// Content may be a string, null (an answer that only calls tools) or an array of text parts.
// Throws kvdesk::Error naming the message for anything else (an image part, an unknown role,
// wrong types), having built nothing.
ConversationTree conversation_from_openai_transcript(const nlohmann::json& j);

}  // namespace kvdesk::store
