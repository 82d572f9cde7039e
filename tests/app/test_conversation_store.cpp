// ConversationStore: conversations, the message tree and its branches, streaming saves, presets,
// settings, recent models, saved KV, export/import, and `kvdesk-cli conversations` on top.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "app/store/conversation_export.h"
#include "app/store/conversation_store.h"
#include "app/store/schema.h"
#include "engine/error.h"
#include "tests/app/old_database.h"
#include "tests/test_support.h"

using namespace kvdesk::store;
using kvdesk::test::TempDir;

namespace {

// Activity order is by millisecond timestamps; space operations whose order a test checks.
void tick() { std::this_thread::sleep_for(std::chrono::milliseconds(3)); }

int64_t count_rows(const std::string& path, const std::string& table) {
  Database db(path, OpenMode::ReadOnly, 1000);
  return db.query_int("SELECT count(*) FROM " + table);
}

std::vector<std::string> contents(const std::vector<Message>& messages) {
  std::vector<std::string> out;
  for (const Message& m : messages) out.push_back(m.content);
  return out;
}

std::vector<std::string> titles(const std::vector<Conversation>& conversations) {
  std::vector<std::string> out;
  for (const Conversation& c : conversations) out.push_back(c.title);
  return out;
}

MessageId add(ConversationStore& store, ConversationId c, std::optional<MessageId> parent, Role role,
              const std::string& text) {
  return store.add_message({.conversation = c, .parent = parent, .role = role, .content = text});
}

// A conversation with an edited second question: u1 a1 (u2 a2 | u2b a2b), the edit active.
struct Branched {
  ConversationId id;
  MessageId u1, a1, u2, a2, u2b, a2b;
};

Branched make_branched(ConversationStore& store) {
  Branched b{};
  b.id = store.create_conversation("Branches", "You are terse.");
  b.u1 = add(store, b.id, std::nullopt, Role::User, "hi");
  b.a1 = add(store, b.id, b.u1, Role::Assistant, "hello");
  b.u2 = add(store, b.id, b.a1, Role::User, "tell a joke");
  b.a2 = add(store, b.id, b.u2, Role::Assistant, "joke A");
  b.u2b = add(store, b.id, b.a1, Role::User, "tell a story");
  b.a2b = add(store, b.id, b.u2b, Role::Assistant, "once upon a time");
  store.finish_message(b.a2b, "once upon a time", MessageStatus::Complete,
                       AnswerStats{.model = "stories260K.gguf", .prompt_tokens = 12, .completion_tokens = 5,
                                   .ttft_ms = 8.5, .decode_tok_s = 410.25, .finish_reason = "stop"});
  return b;
}

// The JSON export with ids replaced by list positions, so two imports of one tree compare equal.
nlohmann::json without_ids(nlohmann::json j) {
  std::map<int64_t, int64_t> position;
  for (size_t i = 0; i < j["messages"].size(); ++i) position[j["messages"][i]["id"].get<int64_t>()] = int64_t(i);
  for (auto& m : j["messages"]) {
    m["id"] = position.at(m["id"].get<int64_t>());
    if (!m["parent_id"].is_null()) m["parent_id"] = position.at(m["parent_id"].get<int64_t>());
  }
  if (!j["active_leaf_id"].is_null()) j["active_leaf_id"] = position.at(j["active_leaf_id"].get<int64_t>());
  j.erase("id");
  return j;
}

}  // namespace

TEST_CASE("a new database gets the current schema in WAL mode and its folder is created", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("nested/folder/kvdesk.db");
  { ConversationStore store = ConversationStore::open(path); }
  Database db(path, OpenMode::ReadOnly, 1000);
  CHECK(db.query_int("PRAGMA user_version") == kSchemaVersion);
  CHECK(db.query_int("PRAGMA application_id") == kApplicationId);
  CHECK(db.query_text("PRAGMA journal_mode") == "wal");
}

TEST_CASE("the default database path follows XDG_DATA_HOME and falls back to HOME", "[app][store]") {
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  const std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("HOME", "/home/someone", 1);
  ::setenv("XDG_DATA_HOME", "/data/xdg", 1);
  CHECK(default_database_path() == "/data/xdg/kvdesk/kvdesk.db");
  ::setenv("XDG_DATA_HOME", "relative/ignored", 1);
  CHECK(default_database_path() == "/home/someone/.local/share/kvdesk/kvdesk.db");
  ::unsetenv("XDG_DATA_HOME");
  CHECK(default_database_path() == "/home/someone/.local/share/kvdesk/kvdesk.db");
  ::setenv("HOME", saved_home.c_str(), 1);
  if (old_xdg) ::setenv("XDG_DATA_HOME", saved_xdg.c_str(), 1);
}

TEST_CASE("conversations are created renamed listed by latest activity and deleted", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const ConversationId a = store.create_conversation("first", "Be brief.");
  tick();
  const ConversationId b = store.create_conversation("second");
  tick();
  const ConversationId c = store.create_conversation("third");
  CHECK(titles(store.list_conversations()) == std::vector<std::string>{"third", "second", "first"});
  tick();
  add(store, a, std::nullopt, Role::User, "bump");
  CHECK(titles(store.list_conversations()) == std::vector<std::string>{"first", "third", "second"});
  tick();
  store.rename_conversation(b, "renamed");
  store.set_system_prompt(b, "Speak French.");
  CHECK(store.conversation(b)->title == "renamed");
  CHECK(store.conversation(b)->system_prompt == "Speak French.");
  CHECK(store.conversation(a)->system_prompt == "Be brief.");
  CHECK(titles(store.list_conversations()) == std::vector<std::string>{"renamed", "first", "third"});
  store.delete_conversation(c);
  CHECK_FALSE(store.conversation(c).has_value());
  CHECK(store.list_conversations().size() == 2);
  CHECK_THROWS_AS(store.rename_conversation(c, "gone"), kvdesk::Error);
}

TEST_CASE("a conversation remembers the engine of its answers, unknown for a version 3 file", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId old_chat = 0;
  {
    ConversationStore store = ConversationStore::open(path);
    old_chat = store.create_conversation("old");
    store.set_conversation_engine(old_chat, "in-process");
  }
  kvdesk::test::downgrade_to_version_3(path);
  {
    Database db(path, OpenMode::ReadOnly, 1000);
    REQUIRE(db.query_int("PRAGMA user_version") == 3);
  }
  ConversationStore store = ConversationStore::open(path);
  CHECK(store.conversation(old_chat)->title == "old");
  CHECK(store.conversation(old_chat)->engine.empty());
  const ConversationId chat = store.create_conversation("remote");
  CHECK(store.conversation(chat)->engine.empty());
  store.set_conversation_engine(chat, "http://127.0.0.1:8080");
  CHECK(store.conversation(chat)->engine == "http://127.0.0.1:8080");
  CHECK(store.list_conversations().front().engine == "http://127.0.0.1:8080");
  store.set_conversation_engine(chat, "in-process");
  CHECK(store.conversation(chat)->engine == "in-process");
  CHECK_THROWS_AS(store.set_conversation_engine(chat + 100, "in-process"), kvdesk::Error);
  Database db(path, OpenMode::ReadOnly, 1000);
  CHECK(db.query_int("PRAGMA user_version") == kSchemaVersion);
}

TEST_CASE("deleting a conversation deletes its messages and saved KV and nothing else", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  {
    ConversationStore store = ConversationStore::open(path);
    const Branched doomed = make_branched(store);
    const Branched kept = make_branched(store);
    const std::vector<uint8_t> kv(1000, 7);
    store.save_kv(doomed.id, "model-a", kv);
    store.save_kv(kept.id, "model-a", kv);
    store.delete_conversation(doomed.id);
    CHECK_FALSE(store.message(doomed.u1).has_value());
    CHECK(contents(store.branch_path(kept.id)).size() == 4);
  }
  CHECK(count_rows(path, "messages") == 6);
  CHECK(count_rows(path, "conversation_kv") == 1);
}

TEST_CASE("search matches titles and message contents on every branch", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const ConversationId rust = store.create_conversation("Rust borrow checker");
  add(store, rust, std::nullopt, Role::User, "explain lifetimes");
  const ConversationId cake = store.create_conversation("Baking");
  const MessageId q = add(store, cake, std::nullopt, Role::User, "100% butter_cake");
  add(store, cake, std::nullopt, Role::User, "an edit that hides the first question");
  CHECK(store.branch_path(cake).size() == 1);
  CHECK(store.message(q).has_value());

  CHECK(titles(store.list_conversations("BORROW")) == std::vector<std::string>{"Rust borrow checker"});
  CHECK(titles(store.list_conversations("lifetimes")) == std::vector<std::string>{"Rust borrow checker"});
  CHECK(titles(store.list_conversations("butter")) == std::vector<std::string>{"Baking"});
  CHECK(titles(store.list_conversations("%")) == std::vector<std::string>{"Baking"});
  CHECK(titles(store.list_conversations("r_c")) == std::vector<std::string>{"Baking"});
  CHECK(store.list_conversations("no such words").empty());
  CHECK(store.list_conversations("").size() == 2);
}

TEST_CASE("editing a past user message creates a sibling branch and the old branch stays reachable", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  Branched b;
  {
    ConversationStore store = ConversationStore::open(path);
    b = make_branched(store);
    CHECK(contents(store.branch_path(b.id)) ==
          std::vector<std::string>{"hi", "hello", "tell a story", "once upon a time"});
    CHECK(contents(store.siblings(b.u2b)) == std::vector<std::string>{"tell a joke", "tell a story"});
    CHECK(contents(store.children(b.a1)) == std::vector<std::string>{"tell a joke", "tell a story"});
    CHECK(store.children(b.a2).empty());
    CHECK(store.newest_leaf_under(b.u2) == b.a2);
    CHECK(store.newest_leaf_under(b.u1) == b.a2b);
    store.set_active_leaf(b.id, store.newest_leaf_under(b.u2));
    CHECK(store.conversation(b.id)->active_leaf_id == b.a2);
  }
  ConversationStore reopened = ConversationStore::open(path);
  CHECK(contents(reopened.branch_path(b.id)) == std::vector<std::string>{"hi", "hello", "tell a joke", "joke A"});
  const MessageId first_edit = add(reopened, b.id, std::nullopt, Role::User, "hello there");
  CHECK(contents(reopened.roots(b.id)) == std::vector<std::string>{"hi", "hello there"});
  CHECK(contents(reopened.siblings(b.u1)) == std::vector<std::string>{"hi", "hello there"});
  CHECK(contents(reopened.branch_path(b.id)) == std::vector<std::string>{"hello there"});
  CHECK(reopened.message(first_edit)->parent_id == std::nullopt);
  CHECK(reopened.load_tree(b.id).messages.size() == 7);
}

TEST_CASE("deleting a message deletes the replies under it and moves the branch to a sibling or the parent", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const Branched b = make_branched(store);
  const MessageId other = store.create_conversation("Other");
  add(store, other, std::nullopt, Role::User, "untouched");

  SECTION("an answer on the active branch: the branch ends at its question") {
    CHECK(store.delete_message(b.a2b) == 1);
    CHECK(contents(store.branch_path(b.id)) == std::vector<std::string>{"hi", "hello", "tell a story"});
    CHECK_FALSE(store.message(b.a2b).has_value());
  }
  SECTION("an edited question with its answer: the branch moves to the sibling before it") {
    CHECK(store.delete_message(b.u2b) == 2);
    CHECK(contents(store.branch_path(b.id)) == std::vector<std::string>{"hi", "hello", "tell a joke", "joke A"});
    CHECK(store.siblings(b.u2).size() == 1);
  }
  SECTION("the first of two siblings: the branch moves to the one after it") {
    store.set_active_leaf(b.id, b.a2);
    CHECK(store.delete_message(b.u2) == 2);
    CHECK(contents(store.branch_path(b.id)) == std::vector<std::string>{"hi", "hello", "tell a story", "once upon a time"});
  }
  SECTION("a message off the active branch: the branch on screen stays") {
    CHECK(store.delete_message(b.a2) == 1);
    CHECK(store.conversation(b.id)->active_leaf_id == b.a2b);
    CHECK(store.children(b.u2).empty());
  }
  SECTION("the root: the whole tree goes and the conversation is empty") {
    CHECK(store.delete_message(b.u1) == 6);
    CHECK(store.branch_path(b.id).empty());
    CHECK(store.conversation(b.id)->active_leaf_id == std::nullopt);
    CHECK(count_rows(dir.file("kvdesk.db"), "messages") == 1);
  }
  CHECK(contents(store.branch_path(other)) == std::vector<std::string>{"untouched"});
  CHECK_THROWS_WITH(store.delete_message(999), Catch::Contains("999"));
}

TEST_CASE("messages must stay inside their conversation", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const Branched b = make_branched(store);
  const ConversationId other = store.create_conversation("other");
  CHECK_THROWS_WITH(add(store, other, b.a1, Role::User, "x"), Catch::Contains("another conversation"));
  CHECK_THROWS_WITH(store.set_active_leaf(other, b.a1), Catch::Contains("is not in conversation"));
  CHECK_THROWS_AS(add(store, 12345, std::nullopt, Role::User, "x"), kvdesk::Error);
  CHECK_THROWS_WITH(store.update_message(98765, "x", MessageStatus::Complete), Catch::Contains("does not exist"));
  CHECK(store.load_tree(other).messages.empty());
  CHECK(store.branch_path(other).empty());
}

TEST_CASE("an answer is saved while it streams and finished with its statistics", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  MessageId answer = 0;
  ConversationId c = 0;
  {
    ConversationStore store = ConversationStore::open(path);
    c = store.create_conversation("stream");
    const MessageId q = add(store, c, std::nullopt, Role::User, "Once upon a time");
    answer = store.add_message({.conversation = c, .parent = q, .role = Role::Assistant, .status = MessageStatus::Streaming});
    store.update_message(answer, "there", MessageStatus::Streaming);
    store.update_message(answer, "there was a", MessageStatus::Streaming);
    CHECK(store.message(answer)->content == "there was a");
    CHECK(store.message(answer)->status == MessageStatus::Streaming);
    CHECK_FALSE(store.message(answer)->stats.has_value());
  }
  {
    ConversationStore store = ConversationStore::open(path);
    CHECK(store.mark_interrupted_answers() == 1);
    CHECK(store.message(answer)->status == MessageStatus::Interrupted);
    const AnswerStats stats{.model = "m.gguf", .prompt_tokens = 4, .completion_tokens = 3, .ttft_ms = 1.5,
                            .decode_tok_s = 99.5, .finish_reason = "length"};
    const int64_t before = store.conversation(c)->updated_at_ms;
    tick();
    store.finish_message(answer, "there was a cat", MessageStatus::Stopped, stats);
    const Message m = *store.message(answer);
    CHECK(m.content == "there was a cat");
    CHECK(m.status == MessageStatus::Stopped);
    REQUIRE(m.stats.has_value());
    CHECK(m.stats->model == "m.gguf");
    CHECK(m.stats->completion_tokens == 3);
    CHECK(m.stats->decode_tok_s == 99.5);
    CHECK(m.stats->finish_reason == "length");
    CHECK(store.conversation(c)->updated_at_ms > before);
    CHECK(store.mark_interrupted_answers() == 0);
  }
}

TEST_CASE("text that looks like SQL is stored verbatim", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const std::string evil = "Robert'); DROP TABLE conversations;-- \"quoted\" ?1 \\ % _ \xF0\x9F\x90\xB1";
  const ConversationId c = store.create_conversation(evil, evil);
  const MessageId m = add(store, c, std::nullopt, Role::User, evil);
  store.set_setting(evil, evil);
  CHECK(store.conversation(c)->title == evil);
  CHECK(store.conversation(c)->system_prompt == evil);
  CHECK(store.message(m)->content == evil);
  CHECK(store.setting(evil) == evil);
  CHECK(store.list_conversations(evil).size() == 1);
}

TEST_CASE("presets can be created listed updated and deleted with unique names", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const PresetId pirate = store.create_preset("Pirate", "Talk like a pirate.");
  const PresetId helper = store.create_preset("Assistant", "You are helpful.");
  std::vector<Preset> presets = store.list_presets();
  REQUIRE(presets.size() == 2);
  CHECK(presets[0].name == "Assistant");
  CHECK(presets[1].system_prompt == "Talk like a pirate.");
  CHECK_THROWS_WITH(store.create_preset("Pirate", "again"), Catch::Contains("already exists"));
  CHECK_THROWS_WITH(store.update_preset(helper, "Pirate", "x"), Catch::Contains("already exists"));
  store.update_preset(pirate, "Captain", "Arr.");
  store.delete_preset(helper);
  presets = store.list_presets();
  REQUIRE(presets.size() == 1);
  CHECK(presets[0].id == pirate);
  CHECK(presets[0].name == "Captain");
  CHECK(presets[0].system_prompt == "Arr.");
  CHECK_THROWS_AS(store.update_preset(helper, "Ghost", ""), kvdesk::Error);
}

TEST_CASE("settings are key value pairs that survive reopening", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  {
    ConversationStore store = ConversationStore::open(path);
    CHECK_FALSE(store.setting("theme").has_value());
    store.set_setting("theme", "dark");
    store.set_setting("theme", "light");
    store.set_setting("font_size", "15");
    store.erase_setting("font_size");
  }
  ConversationStore store = ConversationStore::open(path);
  CHECK(store.setting("theme") == "light");
  CHECK_FALSE(store.setting("font_size").has_value());
}

TEST_CASE("recent models are most recent first and bounded", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  for (int i = 0; i < kMaxRecentModels + 2; ++i) store.note_model_opened("/models/m" + std::to_string(i) + ".gguf");
  std::vector<RecentModel> recent = store.recent_models();
  REQUIRE(recent.size() == size_t(kMaxRecentModels));
  CHECK(recent.front().path == "/models/m11.gguf");
  CHECK(recent.back().path == "/models/m2.gguf");
  CHECK(recent.front().last_opened_ms > 0);
  store.note_model_opened("/models/m5.gguf");
  recent = store.recent_models();
  CHECK(recent.size() == size_t(kMaxRecentModels));
  CHECK(recent.front().path == "/models/m5.gguf");
  store.forget_recent_model("/models/m5.gguf");
  for (const RecentModel& r : store.recent_models()) CHECK(r.path != "/models/m5.gguf");
}

TEST_CASE("a saved KV blob round trips compressed and only under its key", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const ConversationId c = store.create_conversation("kv");
  std::vector<uint8_t> repetitive(1 << 20);
  for (size_t i = 0; i < repetitive.size(); ++i) repetitive[i] = uint8_t(i % 61);
  store.save_kv(c, "stories260K f16 bs16", repetitive);
  REQUIRE(store.kv_info(c).has_value());
  CHECK(store.kv_info(c)->key == "stories260K f16 bs16");
  CHECK(store.kv_info(c)->num_bytes == int64_t(repetitive.size()));
  CHECK(store.kv_info(c)->stored_bytes < int64_t(repetitive.size()) / 10);
  CHECK(store.load_kv(c, "stories260K f16 bs16") == repetitive);
  CHECK_FALSE(store.load_kv(c, "stories260K q8_0 bs16").has_value());

  std::mt19937 rng(3);
  std::vector<uint8_t> noise(100000);
  for (uint8_t& b : noise) b = uint8_t(rng());
  store.save_kv(c, "other", noise);
  CHECK(store.kv_info(c)->stored_bytes == int64_t(noise.size()));
  CHECK(store.load_kv(c, "other") == noise);
  store.clear_kv(c);
  CHECK_FALSE(store.kv_info(c).has_value());
  CHECK_FALSE(store.load_kv(c, "other").has_value());
  CHECK_THROWS_AS(store.save_kv(999, "k", noise), kvdesk::Error);
}

TEST_CASE("Markdown export shows the active branch with its statistics", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const Branched b = make_branched(store);
  const std::string md = conversation_to_markdown(*store.conversation(b.id), store.branch_path(b.id));
  CHECK(md.rfind("# Branches\n\n", 0) == 0);
  CHECK(md.find("> You are terse.") != std::string::npos);
  CHECK(md.find("## User\n\nhi\n\n## Assistant\n\nhello\n\n## User\n\ntell a story\n\n") != std::string::npos);
  CHECK(md.find("_stories260K.gguf, 5 tokens, 410.2 tok/s, first token after 8 ms_") != std::string::npos);
  CHECK(md.find("joke") == std::string::npos);
}

TEST_CASE("JSON export and import round trip the whole tree", "[app][store]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const Branched b = make_branched(store);
  store.set_active_leaf(b.id, b.a2);
  const std::pair<MessageId, MessageTokens> ids[] = {{b.a2, MessageTokens{"stories260K chatml", {1, 450, 31999}}}};
  store.set_message_tokens(ids);
  const nlohmann::json exported = conversation_to_json(store.load_tree(b.id));
  CHECK(exported["messages"].size() == 6);
  CHECK(exported["active_leaf_id"] == b.a2);

  ConversationStore other = ConversationStore::open(dir.file("other.db"));
  other.create_conversation("already here");
  const ConversationId imported = other.import_conversation(conversation_from_json_text(exported.dump()));
  const nlohmann::json again = conversation_to_json(other.load_tree(imported));
  CHECK(without_ids(again) == without_ids(exported));
  CHECK(contents(other.branch_path(imported)) == std::vector<std::string>{"hi", "hello", "tell a joke", "joke A"});
  const std::optional<MessageTokens> tokens = other.branch_path(imported).back().tokens;
  REQUIRE(tokens.has_value());
  CHECK(tokens->identity == "stories260K chatml");
  CHECK(tokens->ids == std::vector<int32_t>{1, 450, 31999});

  nlohmann::json children_first = exported;
  std::reverse(children_first["messages"].begin(), children_first["messages"].end());
  const ConversationTree reordered = conversation_from_json(children_first);
  const ConversationId second = store.import_conversation(reordered);
  CHECK(contents(store.branch_path(second)) == contents(store.branch_path(b.id)));
}

TEST_CASE("malformed conversation JSON is refused with a clear message", "[app][store]") {
  const nlohmann::json good = {
      {"format", "kvdesk.conversation"}, {"version", 1}, {"title", "t"}, {"active_leaf_id", 2},
      {"messages",
       {{{"id", 1}, {"parent_id", nullptr}, {"role", "user"}, {"content", "a"}, {"status", "complete"}},
        {{"id", 2}, {"parent_id", 1}, {"role", "assistant"}, {"content", "b"}, {"status", "complete"}}}}};
  REQUIRE(conversation_from_json(good).messages.size() == 2);
  auto broken = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = good;
    change(j);
    return j;
  };
  const std::vector<nlohmann::json> cases = {
      nlohmann::json::array(),
      broken([](auto& j) { j["format"] = "something.else"; }),
      broken([](auto& j) { j["version"] = kConversationFormatVersion + 1; }),
      broken([](auto& j) { j.erase("title"); }),
      broken([](auto& j) { j["messages"] = "none"; }),
      broken([](auto& j) { j["messages"][0]["role"] = "wizard"; }),
      broken([](auto& j) { j["messages"][0]["status"] = "sleeping"; }),
      broken([](auto& j) { j["messages"][0]["content"] = 42; }),
      broken([](auto& j) { j["messages"][1]["parent_id"] = 7; }),
      broken([](auto& j) { j["messages"][1]["id"] = 1; }),
      broken([](auto& j) { j["messages"][0]["parent_id"] = 2; }),
      broken([](auto& j) { j["active_leaf_id"] = 9; }),
      broken([](auto& j) { j["messages"][1]["stats"] = {{"model", "m"}}; }),
      broken([](auto& j) { j["messages"][1]["tokens"] = "1 2 3"; }),
      broken([](auto& j) { j["messages"][1]["tokens"] = {{"identity", "m"}, {"ids", {1, -2}}}; }),
      broken([](auto& j) { j["messages"][1]["tokens"] = {{"identity", "m"}, {"ids", {1, 1.5}}}; }),
      broken([](auto& j) { j["messages"][1]["tokens"] = {{"identity", "m"}, {"ids", {int64_t(1) << 40}}}; }),
      broken([](auto& j) { j["messages"][1]["tokens"] = {{"ids", {1}}}; }),
  };
  for (const nlohmann::json& j : cases) {
    INFO(j.dump());
    CHECK_THROWS_WITH(conversation_from_json(j), Catch::StartsWith("conversation JSON: "));
  }
  CHECK_THROWS_WITH(conversation_from_json_text("{not json"), Catch::StartsWith("conversation JSON: "));
}

TEST_CASE("a read-only store reads everything and refuses every change", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  Branched b;
  {
    ConversationStore store = ConversationStore::open(path);
    b = make_branched(store);
  }
  ConversationStore ro = ConversationStore::open_read_only(path);
  CHECK(ro.list_conversations().size() == 1);
  CHECK(ro.branch_path(b.id).size() == 4);
  CHECK_THROWS_WITH(ro.create_conversation("no"), Catch::Contains("read-only") && Catch::Contains(path));
  CHECK_THROWS_AS(ro.update_message(b.a2b, "no", MessageStatus::Complete), kvdesk::Error);
  CHECK_THROWS_WITH(ConversationStore::open_read_only(dir.file("missing.db")), Catch::Contains("no such database file"));
  CHECK_FALSE(std::filesystem::exists(dir.file("missing.db")));
}

// ---------------------------------------------------------------------------------------------
// kvdesk-cli conversations
// ---------------------------------------------------------------------------------------------

TEST_CASE("kvdesk-cli conversations lists each conversation with its active branch as JSON", "[app][store][cli]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  Branched b;
  {
    ConversationStore store = ConversationStore::open(path);
    b = make_branched(store);
    tick();
    store.create_conversation("empty one");
  }
  const auto run = kvdesk::test::run_cli({"conversations", "--db", path, "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(run.out);
  REQUIRE(j["conversations"].size() == 2);
  CHECK(j["conversations"][0]["title"] == "empty one");
  CHECK(j["conversations"][0]["messages"].empty());
  const nlohmann::json& c = j["conversations"][1];
  CHECK(c["id"] == b.id);
  CHECK(c["title"] == "Branches");
  CHECK(c["system_prompt"] == "You are terse.");
  REQUIRE(c["messages"].size() == 4);
  CHECK(c["messages"][0] == nlohmann::json{{"id", b.u1}, {"parent_id", nullptr}, {"role", "user"},
                                           {"content", "hi"}, {"status", "complete"}});
  CHECK(c["messages"][3]["id"] == b.a2b);
  CHECK(c["messages"][3]["parent_id"] == b.u2b);

  const auto text = kvdesk::test::run_cli({"conversations", "--db", path, "--search", "story"});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("Branches") != std::string::npos);
  CHECK(text.out.find("empty one") == std::string::npos);
}

TEST_CASE("kvdesk-cli conversations exports one conversation as Markdown or JSON", "[app][store][cli]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  Branched b;
  {
    ConversationStore store = ConversationStore::open(path);
    b = make_branched(store);
  }
  const std::string id = std::to_string(b.id);
  const auto md = kvdesk::test::run_cli({"conversations", "--db", path, "--export", id, "--format", "md"});
  REQUIRE(md.exit_code == 0);
  CHECK(md.out.rfind("# Branches", 0) == 0);
  CHECK(md.out.find("once upon a time") != std::string::npos);

  const auto json = kvdesk::test::run_cli({"conversations", "--db", path, "--export", id, "--format", "json"});
  REQUIRE(json.exit_code == 0);
  CHECK(conversation_from_json_text(json.out).messages.size() == 6);
  const auto branch =
      kvdesk::test::run_cli({"conversations", "--db", path, "--export", id, "--format", "json", "--active-branch"});
  REQUIRE(branch.exit_code == 0);
  CHECK(conversation_from_json_text(branch.out).messages.size() == 4);
}

TEST_CASE("kvdesk-cli conversations exits 2 on bad arguments and 1 on a database error", "[app][store][cli]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  { ConversationStore::open(path).create_conversation("x"); }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"conversations", "--db", path, "--export", "1", "--format", "xml"},
           {"conversations", "--db", path, "--format", "json"},
           {"conversations", "--db", path, "--export", "one"},
           {"conversations", "--db", path, "--export", "1", "--json"},
       }) {
    const auto run = kvdesk::test::run_cli(args);
    INFO(args.back() << ": " << run.err);
    CHECK(run.exit_code == 2);
  }
  {
    std::ofstream junk(dir.file("junk.db"), std::ios::binary);
    junk << std::string(5000, 'z');
  }
  for (const std::string& bad : {dir.file("missing.db"), dir.file("junk.db")}) {
    const auto run = kvdesk::test::run_cli({"conversations", "--db", bad});
    INFO(run.err);
    CHECK(run.exit_code == 1);
    CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
    CHECK(run.err.find(bad) != std::string::npos);
  }
  const auto missing_id = kvdesk::test::run_cli({"conversations", "--db", path, "--export", "42"});
  CHECK(missing_id.exit_code == 1);
  CHECK(missing_id.err.find("conversation 42 does not exist") != std::string::npos);
}
