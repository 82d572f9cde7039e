// How a stored conversation becomes a chat request: the system prompt, then the active branch's
// messages in order. The GUI and `kvdesk-cli chat` both render a conversation through this, so
// a turn continued from either side submits the same messages (and so hits the same KV).
#pragma once
#include <string>
#include <vector>

#include "app/store/store_types.h"
#include "engine/engine_types.h"

namespace kvdesk::chat {

// The messages a turn submits: the system prompt (when set), then `branch` (root first). An
// empty assistant message (the answer being generated) is left out.
std::vector<ChatMessage> chat_messages(const store::Conversation& conversation, const std::vector<store::Message>& branch);

// A new conversation's title from its first message: the first line, cut on a UTF-8 character
// boundary; "New chat" when that line is empty.
std::string title_from(const std::string& text);

inline constexpr const char* kNewChatTitle = "New chat";

}  // namespace kvdesk::chat
