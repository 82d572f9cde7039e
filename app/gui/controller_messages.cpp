// Controller, single messages: delete one (with the replies under it, see
// ConversationStore::delete_message for why), and continue an answer that stopped at its token
// limit. A continued answer stays one message: the engine gets the conversation with that
// answer left open (Request::continue_answer), so the parked turn, which holds every token of
// it but the last, is reused and only the new tokens are computed; they are appended to the
// message's text and token ids.
#include "app/chat/chat_history.h"
#include "app/gui/controller.h"
#include "engine/error.h"

namespace kvdesk::gui {

bool Controller::can_continue(const store::Message& m) {
  return m.role == store::Role::Assistant && m.status == store::MessageStatus::Complete && m.stats &&
         m.stats->finish_reason == finish_reason_name(FinishReason::Length);
}

void Controller::delete_message(store::MessageId id) {
  const std::optional<store::Message> m = store().message(id);
  if (!m) throw Error("that message no longer exists");
  if (live_request_of(m->conversation_id)) throw Error("this conversation is still answering: stop it first");
  const int64_t deleted = store().delete_message(id);
  vm_.ui.delete_message = 0;
  vm_.ui.editing_message = 0;
  reload_conversations();
  if (m->conversation_id == vm_.chat.conversation_id) reload_chat();
  set_status(deleted > 1 ? "message and " + std::to_string(deleted - 1) + " repl" + (deleted == 2 ? "y" : "ies") + " under it deleted"
                         : "message deleted",
             false);
}

void Controller::continue_answer(store::MessageId id) {
  if (vm_.model.state != ui::ModelState::Loaded) throw Error("no model is open: open one first");
  const std::optional<store::Message> m = store().message(id);
  if (!m || m->role != store::Role::Assistant) throw Error("only an answer can be continued");
  const store::ConversationId conversation = m->conversation_id;
  if (live_request_of(conversation)) throw Error("this conversation is still answering: stop it first");
  if (!can_continue(*m)) throw Error("this answer did not stop at its token limit: there is nothing to continue");
  if (!store().children(id).empty()) throw Error("this answer has replies: only the last answer of a branch can be continued");
  store().set_active_leaf(conversation, id);
  const std::optional<store::Conversation> c = store().conversation(conversation);
  if (!c) throw Error("the conversation no longer exists");
  std::string kv_source = restore_kv(conversation);
  chat::ChatTurn chat = chat::chat_turn(*c, store().branch_path(conversation));
  Request request = make_request(conversation, chat);
  request.continue_answer = true;
  store().update_message(id, m->content, store::MessageStatus::Streaming);
  const RequestId request_id = engine_.chat().submit(std::move(request));
  if (!chat.damaged.empty()) set_status(chat.damaged.front(), true);
  live_[request_id] = LiveAnswer{conversation, id, m->content, Clock::now(), std::move(kv_source), std::move(chat), true,
                                 int32_t(m->stats->completion_tokens)};
  live_[request_id].opened_in_reasoning = answers_open_in_reasoning();
  last_failure_.clear();
  reload_conversations();
  if (conversation == vm_.chat.conversation_id) reload_chat();
  vm_.ui.scroll_chat_to_bottom = true;
}

// A continued answer's turn ends with the answer itself: its reported span is the answer's
// earlier ids, to which the new ones are appended. When that span could not be told apart, the
// answer's stored ids would cover only its start, so they are replaced by none (the next turn
// renders its text).
void Controller::save_answer_tokens(const LiveAnswer& live, const ChatTokens& reported) {
  if (!live.continued) {
    chat::save_chat_tokens(store(), live.chat, live.message, reported);
    return;
  }
  chat::ChatTurn before = live.chat;   // the turn without the answer it continued
  ChatTokens merged = reported;
  std::vector<int32_t> earlier;
  if (!before.messages.empty() && merged.messages.size() == before.messages.size()) {
    earlier = std::move(merged.messages.back());
    merged.messages.pop_back();
    before.messages.pop_back();
    before.tokens.pop_back();
    before.message_ids.pop_back();
  }
  merged.answer.clear();
  if (!earlier.empty()) {
    merged.answer = std::move(earlier);
    merged.answer.insert(merged.answer.end(), reported.answer.begin(), reported.answer.end());
  }
  chat::save_chat_tokens(store(), before, live.message, merged);
  if (merged.answer.empty() && !reported.identity.empty()) {
    const std::pair<store::MessageId, store::MessageTokens> none{live.message, store::MessageTokens{reported.identity, {}}};
    store().set_message_tokens({&none, 1});
  }
}

}  // namespace kvdesk::gui
