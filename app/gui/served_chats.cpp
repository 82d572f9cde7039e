// Keeping served chats as conversations (see served_chats.h).
#include "app/gui/served_chats.h"

#include <algorithm>

#include "app/store/message_fields.h"
#include "engine/error.h"

namespace kvdesk::gui {
namespace {

using nlohmann::json;

// A message's fields as the store keeps them (tool calls checked and their arguments as text),
// so a message the client sends back compares equal to the one kept from the answer.
std::string stored_fields(const std::string& fields_json) {
  if (fields_json.empty()) return {};
  const json fields = json::parse(fields_json, nullptr, false);
  if (!fields.is_object()) return {};
  try {
    return store::fields_from_message_json(fields, "served message");
  } catch (const std::exception&) {
    return {};
  }
}

store::Role role_of(const std::string& role) {
  if (role == "developer") return store::Role::System;
  if (role == "function") return store::Role::Tool;
  return store::parse_role(role).value_or(store::Role::User);
}

// What identifies a message when a client sends it back: role, content and fields, but not an
// answer's reasoning_content, which clients do not send back.
std::string key_of(const ChatMessage& m) {
  std::string fields = stored_fields(m.fields_json);
  if (!fields.empty()) {
    json object = json::parse(fields);
    object.erase("reasoning_content");
    fields = object.empty() ? std::string() : object.dump();
  }
  return std::string(store::role_name(role_of(m.role))) + '\x1f' + m.content + '\x1f' + fields;
}

// The stored message a thread's position names, if it is still there as the thread saw it (the
// user may have deleted it, and SQLite may give its id to a new message since).
bool still_stored(store::ConversationStore& store, store::ConversationId conversation, store::MessageId id,
                  const ChatMessage& as_sent) {
  const std::optional<store::Message> m = store.message(id);
  return m && m->conversation_id == conversation && m->role == role_of(as_sent.role) && m->content == as_sent.content;
}

size_t leading_system_messages(const std::vector<ChatMessage>& messages) {
  size_t n = 0;
  while (n < messages.size() && role_of(messages[n].role) == store::Role::System) ++n;
  return n;
}

// How many of `keys` begin `thread_keys` too.
size_t shared_prefix(const std::vector<std::string>& thread_keys, const std::vector<std::string>& keys) {
  size_t n = 0;
  while (n < thread_keys.size() && n < keys.size() && thread_keys[n] == keys[n]) ++n;
  return n;
}

}  // namespace

std::vector<store::ConversationId> ServedChats::record(store::ConversationStore& store,
                                                        const std::vector<server::ServedChat>& chats,
                                                        const std::string& server_url) {
  std::vector<store::ConversationId> changed;
  for (const server::ServedChat& chat : chats) {
    try {
      record_one(store, chat, server_url, changed);
    } catch (const Error&) {
      // Its conversation changed under the thread (deleted, say): the chat starts a new one.
      record_one(store, chat, server_url, changed, /*fresh=*/true);
    }
  }
  return changed;
}

void ServedChats::record_one(store::ConversationStore& store, const server::ServedChat& chat, const std::string& server_url,
                             std::vector<store::ConversationId>& changed, bool fresh) {
  std::vector<std::string> keys;
  for (const ChatMessage& m : chat.messages) keys.push_back(key_of(m));
  const size_t system = leading_system_messages(chat.messages);
  // The kept thread sharing the most messages, past the system prompt, with a stored message to add under.
  Thread* best = nullptr;
  size_t best_shared = system;
  for (Thread& t : threads_) {
    const size_t shared = std::min(shared_prefix(t.keys, keys), keys.size());
    if (!fresh && shared > best_shared && t.ids[shared - 1] != 0 &&
        still_stored(store, t.conversation, t.ids[shared - 1], chat.messages[shared - 1])) {
      best = &t;
      best_shared = shared;
    }
  }
  Thread thread = best ? *best : start_thread(store, chat, server_url);
  if (best) threads_.erase(threads_.begin() + (best - threads_.data()));
  const size_t shared = best ? best_shared : system;
  thread.keys.resize(shared);
  thread.ids.resize(shared);
  std::optional<store::MessageId> parent;
  if (shared > 0 && thread.ids[shared - 1] != 0) parent = thread.ids[shared - 1];
  const auto add = [&](const ChatMessage& m, const std::string& key) {
    const std::string fields = stored_fields(m.fields_json);
    parent = store.add_message({.conversation = thread.conversation, .parent = parent, .role = role_of(m.role),
                                .content = m.content, .fields_json = fields});
    thread.keys.push_back(key);
    thread.ids.push_back(*parent);
  };
  for (size_t i = shared; i < chat.messages.size(); ++i) add(chat.messages[i], keys[i]);
  add(chat.answer, key_of(chat.answer));
  store.set_conversation_engine(thread.conversation, server_url);
  if (std::find(changed.begin(), changed.end(), thread.conversation) == changed.end()) changed.push_back(thread.conversation);
  threads_.push_back(std::move(thread));
  if (threads_.size() > kMaxServedThreads) threads_.erase(threads_.begin());
}

ServedChats::Thread ServedChats::start_thread(store::ConversationStore& store, const server::ServedChat& chat,
                                              const std::string& server_url) {
  const size_t system = leading_system_messages(chat.messages);
  std::string system_prompt;
  std::string first_question;
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    if (i < system) system_prompt += (system_prompt.empty() ? "" : "\n\n") + chat.messages[i].content;
    if (i >= system && first_question.empty() && role_of(chat.messages[i].role) == store::Role::User) {
      first_question = chat.messages[i].content;
    }
  }
  Thread thread;
  thread.conversation = store.create_conversation("Served: " + store::title_from(first_question), system_prompt);
  store.set_conversation_engine(thread.conversation, server_url);
  for (size_t i = 0; i < system; ++i) {
    thread.keys.push_back(key_of(chat.messages[i]));
    thread.ids.push_back(0);
  }
  return thread;
}

}  // namespace kvdesk::gui
