// Served chats kept as conversations (app/gui/served_chats.h) without a server: a client's next
// turn, sent back without the answer's reasoning, continues the conversation; a tool call's id as
// the client got it matches; a conversation changed under a kept thread starts a new one.
#include <catch2/catch.hpp>

#include "app/gui/served_chats.h"
#include "tests/test_support.h"

using namespace kvdesk;

namespace {

ChatMessage user(const std::string& text) { return {"user", text}; }

server::ServedChat chat(std::vector<ChatMessage> messages, ChatMessage answer) {
  return server::ServedChat{std::move(messages), std::move(answer)};
}

}  // namespace

TEST_CASE("a served chat's next turn continues its conversation, reasoning and tool call ids as the client has them",
          "[gui][serving][tools]") {
  test::TempDir dir;
  store::ConversationStore db = store::ConversationStore::open(dir.file("kvdesk.db"));
  gui::ServedChats kept;
  const ChatMessage thinking_answer{"assistant", "It is 3 C.", R"({"reasoning_content":"Look it up."})"};
  REQUIRE(kept.record(db, {chat({user("Weather?")}, thinking_answer)}, "http://127.0.0.1:1").size() == 1);

  const ChatMessage resent_answer{"assistant", "It is 3 C."};   // clients drop reasoning_content
  const std::string call = R"({"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"w","arguments":"{}"}}]})";
  kept.record(db, {chat({user("Weather?"), resent_answer, user("Tomorrow?")}, ChatMessage{"assistant", "", call})}, "u");
  const ChatMessage call_as_sent{"assistant", "", call};
  const ChatMessage result{"tool", "4 C", R"({"tool_call_id":"call_abc"})"};
  kept.record(db, {chat({user("Weather?"), resent_answer, user("Tomorrow?"), call_as_sent, result}, {"assistant", "4 C."})}, "u");

  const std::vector<store::Conversation> conversations = db.list_conversations();
  REQUIRE(conversations.size() == 1);
  const std::vector<store::Message> path = db.branch_path(conversations[0].id);
  REQUIRE(path.size() == 6);
  CHECK(path[1].fields_json.find("Look it up.") != std::string::npos);   // kept, though not sent back
  CHECK(path[3].fields_json.find("call_abc") != std::string::npos);
  CHECK(path[4].role == store::Role::Tool);
  CHECK(path[5].content == "4 C.");
}

TEST_CASE("a served chat whose kept conversation lost a message starts a new conversation", "[gui][serving]") {
  test::TempDir dir;
  store::ConversationStore db = store::ConversationStore::open(dir.file("kvdesk.db"));
  gui::ServedChats kept;
  kept.record(db, {chat({user("one")}, {"assistant", "two"})}, "u");
  const store::ConversationId first = db.list_conversations().at(0).id;
  const std::vector<store::Message> path = db.branch_path(first);
  db.delete_message(path[1].id);   // the user deletes the answer
  db.add_message({.conversation = first, .parent = path[0].id, .role = store::Role::Assistant, .content = "other"});
  REQUIRE_NOTHROW(kept.record(db, {chat({user("one"), {"assistant", "two"}, user("three")}, {"assistant", "four"})}, "u"));
  CHECK(db.list_conversations().size() == 2);
  CHECK(db.branch_path(first).size() == 2);   // untouched: one, other
}
