// Chats the app's HTTP server answered, kept as conversations so the window shows what an agent
// or editor did with the model: tool calls and results included. A client sends the whole
// history every turn, so a chat that continues one kept before is added to that conversation:
// the messages it shares with the kept branch are found, the new ones and the answer added
// under the last shared one (a resent question with a new answer, or an edited one, becomes a
// branch, as in the window's own chats). A chat that continues nothing kept this session starts
// a conversation titled "Served: " and its first question.
#pragma once
#include <string>
#include <vector>

#include "app/server/http_server.h"
#include "app/store/conversation_store.h"

namespace kvdesk::gui {

class ServedChats {
 public:
  // Stores each chat in order; returns the conversations it added to (created ones included). A
  // chat whose kept conversation changed under it (a message deleted) starts a new one. Throws
  // kvdesk::Error when the store fails (what was written before stays).
  std::vector<store::ConversationId> record(store::ConversationStore& store, const std::vector<server::ServedChat>& chats,
                                            const std::string& server_url);

 private:
  // A kept conversation's branch as the server saw it. Invariant: keys and ids have the same
  // length; keys[i] identifies the i-th message of the chat (role, content, fields), ids[i] is
  // its stored message, 0 for the leading system messages, which are the system prompt.
  struct Thread {
    store::ConversationId conversation = 0;
    std::vector<std::string> keys;
    std::vector<store::MessageId> ids;
  };

  // fresh: start a conversation whatever the kept threads share with the chat.
  void record_one(store::ConversationStore& store, const server::ServedChat& chat, const std::string& server_url,
                  std::vector<store::ConversationId>& changed, bool fresh = false);
  Thread start_thread(store::ConversationStore& store, const server::ServedChat& chat, const std::string& server_url);

  std::vector<Thread> threads_;   // newest last
};

inline constexpr size_t kMaxServedThreads = 64;   // the oldest are forgotten past this (a new conversation then)

}  // namespace kvdesk::gui
