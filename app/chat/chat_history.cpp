// The rendering of a stored conversation as chat messages with their token ids, and the storing
// of a finished turn's spans; shared by the GUI and the CLI.
#include "app/chat/chat_history.h"

namespace kvdesk::chat {

ChatTurn chat_turn(const store::Conversation& conversation, const std::vector<store::Message>& branch) {
  ChatTurn out;
  out.started = conversation.created_at_ms / 1000;
  if (!conversation.system_prompt.empty()) {
    out.messages.push_back({"system", conversation.system_prompt});
    out.tokens.emplace_back();
    out.message_ids.push_back(0);
  }
  for (const store::Message& m : branch) {
    if (m.role == store::Role::Assistant && m.content.empty() && m.fields_json.empty()) continue;
    out.messages.push_back({std::string(store::role_name(m.role)), m.content, m.fields_json});
    out.tokens.push_back(m.tokens ? MessageTokens{m.tokens->identity, m.tokens->ids} : MessageTokens{});
    out.message_ids.push_back(m.id);
    if (!m.tokens_damaged.empty()) out.damaged.push_back(m.tokens_damaged);
  }
  return out;
}

std::vector<ChatMessage> chat_messages(const store::Conversation& conversation, const std::vector<store::Message>& branch) {
  return chat_turn(conversation, branch).messages;
}

void set_chat(Request& request, const ChatTurn& turn) {
  request.messages = turn.messages;
  request.message_tokens = turn.tokens;
  request.template_time = turn.started;
}

int save_chat_tokens(store::ConversationStore& store, const ChatTurn& turn, store::MessageId answer,
                     const ChatTokens& reported) {
  if (reported.identity.empty()) return 0;
  std::vector<std::pair<store::MessageId, store::MessageTokens>> updates;
  for (size_t i = 0; i < turn.messages.size() && i < reported.messages.size(); ++i) {
    const std::vector<int32_t>& span = reported.messages[i];
    const bool known = turn.tokens[i].identity == reported.identity && turn.tokens[i].ids == span;
    if (turn.message_ids[i] == 0 || span.empty() || known) continue;
    updates.push_back({turn.message_ids[i], store::MessageTokens{reported.identity, span}});
  }
  const int changed = int(updates.size());
  if (!reported.answer.empty()) updates.push_back({answer, store::MessageTokens{reported.identity, reported.answer}});
  store.set_message_tokens(updates);
  return changed;
}

}  // namespace kvdesk::chat
