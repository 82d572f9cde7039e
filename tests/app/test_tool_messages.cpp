// Tool calls and tool results in stored conversations: the store keeps a message's OpenAI
// fields (schema version 6, migrated from 5 by rebuilding the messages table), export and
// import carry them, an OpenAI-shaped transcript imports as a branch, and a turn hands them to
// the chat template.
#include <catch2/catch.hpp>

#include "app/chat/chat_history.h"
#include "app/store/conversation_export.h"
#include "app/store/conversation_store.h"
#include "app/store/message_fields.h"
#include "app/store/schema.h"
#include "engine/error.h"
#include "tests/app/old_database.h"
#include "tests/test_support.h"

using namespace kvdesk::store;
using kvdesk::test::TempDir;
using nlohmann::json;

namespace {

const std::string kCallFields =
    R"({"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Seoul\"}"}}]})";
const std::string kResultFields = R"({"tool_call_id":"call_1","name":"get_weather"})";

// user -> answer that calls get_weather -> the tool's result -> the final answer.
ConversationId tool_conversation(ConversationStore& store) {
  const ConversationId c = store.create_conversation("weather", "Use the tools.");
  const MessageId q = store.add_message({.conversation = c, .role = Role::User, .content = "Weather in Seoul?"});
  const MessageId call = store.add_message({.conversation = c, .parent = q, .role = Role::Assistant, .content = "",
                                            .fields_json = kCallFields});
  const MessageId result = store.add_message({.conversation = c, .parent = call, .role = Role::Tool,
                                              .content = R"({"temp_c": 3})", .fields_json = kResultFields});
  store.add_message({.conversation = c, .parent = result, .role = Role::Assistant, .content = "It is 3 °C."});
  return c;
}

json transcript() {
  return json::parse(R"({
    "model": "local",
    "messages": [
      {"role": "developer", "content": "Use the tools."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Seoul?"}]},
      {"role": "assistant", "content": null,
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Seoul"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 3}"},
      {"role": "assistant", "content": "It is 3 °C."}
    ],
    "tools": [], "temperature": 0.2
  })");
}

}  // namespace

TEST_CASE("tool calls and tool results keep their fields through the store, JSON export and import", "[app][store][tools]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("a.db"));
  const ConversationTree tree = store.load_tree(tool_conversation(store));
  REQUIRE(tree.messages.size() == 4);
  CHECK(tree.messages[1].fields_json == kCallFields);
  CHECK(tree.messages[2].role == Role::Tool);
  CHECK(tree.messages[2].fields_json == kResultFields);
  CHECK(tree.messages[3].fields_json.empty());

  const json exported = conversation_to_json(tree);
  CHECK(exported["version"] == kConversationFormatVersion);
  CHECK(exported["messages"][1]["tool_calls"][0]["function"]["name"] == "get_weather");
  CHECK(exported["messages"][2]["role"] == "tool");
  CHECK(exported["messages"][2]["tool_call_id"] == "call_1");
  CHECK_FALSE(exported["messages"][0].contains("tool_calls"));

  ConversationStore other = ConversationStore::open(dir.file("b.db"));
  const ConversationTree back = other.load_tree(other.import_conversation(conversation_from_json_text(exported.dump())));
  REQUIRE(back.messages.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(back.messages[i].role == tree.messages[i].role);
    CHECK(json::parse(back.messages[i].fields_json.empty() ? "{}" : back.messages[i].fields_json) ==
          json::parse(tree.messages[i].fields_json.empty() ? "{}" : tree.messages[i].fields_json));
  }
  const MessageFields call = parse_message_fields(back.messages[1].fields_json);
  REQUIRE(call.tool_calls.size() == 1);
  CHECK(call.tool_calls[0].id == "call_1");
  CHECK(call.tool_calls[0].arguments == R"({"city":"Seoul"})");
}

TEST_CASE("markdown export writes tool calls as fenced JSON and names each tool result", "[app][store][tools]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("a.db"));
  const ConversationId c = tool_conversation(store);
  const std::string md = conversation_to_markdown(*store.conversation(c), store.branch_path(c));
  CHECK(md.find("**Tool call** `get_weather`\n\n```json\n{\"city\":\"Seoul\"}\n```") != std::string::npos);
  CHECK(md.find("## Tool result (get_weather, call_1)\n\n{\"temp_c\": 3}") != std::string::npos);
}

TEST_CASE("a version 5 database migrates to tool messages keeping ids, tree, leaf and foreign keys", "[app][store][tools]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId c = 0;
  std::vector<Message> before;
  {
    ConversationStore store = ConversationStore::open(path);
    c = store.create_conversation("old", "sys");
    const MessageId q = store.add_message({.conversation = c, .role = Role::User, .content = "first"});
    const MessageId a = store.add_message({.conversation = c, .parent = q, .role = Role::Assistant, .content = "one"});
    store.add_message({.conversation = c, .parent = q, .role = Role::Assistant, .content = "two"});
    store.set_active_leaf(c, a);
    before = store.load_tree(c).messages;
  }
  kvdesk::test::downgrade_to_version_5(path);
  {
    Database db(path, OpenMode::ReadOnly, 1000);
    REQUIRE(db.query_int("PRAGMA user_version") == 5);
  }
  ConversationStore store = ConversationStore::open(path);
  const ConversationTree after = store.load_tree(c);
  REQUIRE(after.messages.size() == before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK(after.messages[i].id == before[i].id);
    CHECK(after.messages[i].parent_id == before[i].parent_id);
    CHECK(after.messages[i].content == before[i].content);
    CHECK(after.messages[i].fields_json.empty());
  }
  CHECK(after.conversation.active_leaf_id == before[1].id);
  store.add_message({.conversation = c, .parent = before[1].id, .role = Role::Tool, .content = "42",
                     .fields_json = kResultFields});
  {
    Database db(path, OpenMode::ReadOnly, 1000);
    CHECK(db.query_int("PRAGMA user_version") == kSchemaVersion);
    CHECK(db.query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'messages_v6'") == 0);
  }
  store.delete_conversation(c);
  Database db(path, OpenMode::ReadOnly, 1000);
  CHECK(db.query_int("SELECT count(*) FROM messages") == 0);   // the cascade still holds
}

TEST_CASE("an OpenAI transcript imports as one branch with its tool calls and results", "[app][store][tools]") {
  const ConversationTree tree = conversation_from_json_text(transcript().dump());
  CHECK(tree.conversation.system_prompt == "Use the tools.");
  CHECK(tree.conversation.title == "Weather in Seoul?");
  REQUIRE(tree.messages.size() == 4);
  CHECK(tree.messages[0].role == Role::User);
  CHECK(tree.messages[0].content == "Weather in Seoul?");
  CHECK(tree.messages[1].content.empty());
  const MessageFields call = parse_message_fields(tree.messages[1].fields_json);
  REQUIRE(call.tool_calls.size() == 1);
  CHECK(call.tool_calls[0].name == "get_weather");
  CHECK(json::parse(call.tool_calls[0].arguments) == json{{"city", "Seoul"}});
  CHECK(tree.messages[2].role == Role::Tool);
  CHECK(parse_message_fields(tree.messages[2].fields_json).tool_call_id == "call_1");
  CHECK(tree.messages[3].parent_id == tree.messages[2].id);
  CHECK(tree.conversation.active_leaf_id == tree.messages[3].id);

  const ConversationTree bare = conversation_from_json_text(transcript()["messages"].dump());
  CHECK(bare.messages.size() == 4);
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("a.db"));
  CHECK(store.load_tree(store.import_conversation(tree)).messages.size() == 4);
}

TEST_CASE("a hostile transcript or tool field is refused with the place named", "[app][store][tools]") {
  const auto with = [](const char* message) {
    json t = transcript();
    t["messages"].push_back(json::parse(message));
    return t.dump();
  };
  CHECK_THROWS_WITH(conversation_from_json_text(with(R"({"role": "user", "content": [{"type": "image_url"}]})")),
                    Catch::Contains("message #5") && Catch::Contains("image_url"));
  CHECK_THROWS_WITH(conversation_from_json_text(with(R"({"role": "robot", "content": "x"})")),
                    Catch::Contains("unknown role 'robot'"));
  CHECK_THROWS_WITH(conversation_from_json_text(with(R"({"role": "assistant", "tool_calls": {}})")),
                    Catch::Contains("'tool_calls' must be an array"));
  CHECK_THROWS_WITH(conversation_from_json_text(with(R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]})")),
                    Catch::Contains("'arguments'"));
  CHECK_THROWS_WITH(conversation_from_json_text(with(R"({"role": "tool", "content": "x", "tool_call_id": 7})")),
                    Catch::Contains("'tool_call_id' must be a string"));
  CHECK_THROWS_WITH(conversation_from_json_text(R"({"messages": [{"role": "system", "content": "only"}]})"),
                    Catch::StartsWith("OpenAI messages: "));
  CHECK_THROWS_WITH(conversation_from_json_text(R"({"messages": 3})"), Catch::StartsWith("OpenAI messages: "));
  CHECK_THROWS_WITH(conversation_from_json_text("[3]"), Catch::Contains("must be an object"));
  // kvdesk's own format checks the same fields.
  json own = conversation_to_json(conversation_from_json_text(transcript().dump()));
  own["messages"][1]["tool_calls"] = "call";
  CHECK_THROWS_WITH(conversation_from_json(own), Catch::StartsWith("conversation JSON: message #1"));
}

TEST_CASE("a conversation file nested a million levels deep is refused, not walked", "[app][store][tools]") {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  CHECK_THROWS_WITH(conversation_from_json_text(deep), Catch::Contains("nests deeper than"));
  const std::string deep_arguments = R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": )" +
                                     std::string(100000, '[') + std::string(100000, ']') + "}}]}]}";
  CHECK_THROWS_WITH(conversation_from_json_text(deep_arguments), Catch::Contains("nests deeper than"));
  CHECK(parse_message_fields(R"({"tool_calls": )" + deep + "}").tool_calls.empty());
}

TEST_CASE("a damaged fields column reads as no fields rather than failing", "[app][store][tools]") {
  CHECK(parse_message_fields("not json").tool_calls.empty());
  CHECK(parse_message_fields(R"({"tool_calls": [3, {"function": "x"}, {"function": {"name": "f"}}]})").tool_calls.size() == 1);
  CHECK(parse_message_fields(R"([1, 2])").name.empty());
}

TEST_CASE("a turn hands the chat template tool calls, tool results and an answer that only calls tools", "[app][chat][tools]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("a.db"));
  const ConversationId c = tool_conversation(store);
  const kvdesk::chat::ChatTurn turn = kvdesk::chat::chat_turn(*store.conversation(c), store.branch_path(c));
  REQUIRE(turn.messages.size() == 5);
  CHECK(turn.messages[0].role == "system");
  CHECK(turn.messages[2].role == "assistant");
  CHECK(turn.messages[2].content.empty());
  CHECK(turn.messages[2].fields_json == kCallFields);
  CHECK(turn.messages[3].role == "tool");
  CHECK(turn.messages[3].fields_json == kResultFields);
}
