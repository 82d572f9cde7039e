// How a stored conversation becomes a chat request: the system prompt, then the active branch's
// messages in order, each with its stored token ids. The GUI and `kvdesk-cli chat` both render a
// conversation through this, so a turn continued from either side submits the same messages and
// ids (and so hits the same KV); the spans the engine reports for a finished turn are stored
// back here, so the next turn is built from ids, never from re-tokenized text.
#pragma once
#include <string>
#include <vector>

#include "app/store/conversation_store.h"
#include "engine/engine_types.h"

namespace kvdesk::chat {

// The messages a turn submits and which stored message each one is. Invariant: messages,
// tokens and message_ids have the same length.
struct ChatTurn {
  std::vector<ChatMessage> messages;
  std::vector<MessageTokens> tokens;            // stored ids; empty where none are usable
  std::vector<store::MessageId> message_ids;    // 0 for the system prompt
  std::vector<std::string> damaged;             // a line per message whose stored ids are damaged
  int64_t started = 0;                          // when the conversation began, Unix seconds
};

// The system prompt (when set), then `branch` (root first), each message with its OpenAI fields
// (tool calls, tool results) for the chat template. An empty assistant message (the answer being
// generated) is left out.
ChatTurn chat_turn(const store::Conversation& conversation, const std::vector<store::Message>& branch);
std::vector<ChatMessage> chat_messages(const store::Conversation& conversation, const std::vector<store::Message>& branch);

// The request's messages and their ids, and the conversation's start as the date its chat
// template shows.
void set_chat(Request& request, const ChatTurn& turn);

// Stores what a finished turn reported: each message's span that differs from the stored one,
// and the answer's generated ids. Nothing when the engine reported no identity (a remote
// server). Returns how many messages got new ids.
int save_chat_tokens(store::ConversationStore& store, const ChatTurn& turn, store::MessageId answer,
                     const ChatTokens& reported);

}  // namespace kvdesk::chat
