// A conversation's own settings in the store: schema version 2's table, the migration that
// opens version-1 files with every conversation on the app's defaults, round trips, and
// hand-edited values that are not numbers, and the settings in JSON exports and imports.
#include <catch2/catch.hpp>

#include "app/store/conversation_export.h"
#include "app/store/conversation_store.h"
#include "app/store/schema.h"
#include "engine/error.h"
#include "tests/app/old_database.h"
#include "tests/test_support.h"

using namespace kvdesk::store;
using kvdesk::test::TempDir;

namespace {

int64_t settings_rows(const std::string& path) {
  Database db(path, OpenMode::ReadOnly, 1000);
  return db.query_int("SELECT count(*) FROM conversation_settings");
}

ConversationSettings some_settings() {
  return ConversationSettings{.context_length = 128, .max_tokens = 7, .temperature = 0.25, .top_p = 0.5,
                              .top_k = 12, .min_p = 0.125, .seed = 42, .kv_retention = "h2o", .kv_keep = 0.75};
}

}  // namespace

TEST_CASE("a version 1 database opens migrated with its conversations on the app defaults", "[app][store][settings]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId id = 0;
  {
    ConversationStore store = ConversationStore::open(path);
    id = store.create_conversation("Old chat", "Be brief.");
    store.add_message({.conversation = id, .role = Role::User, .content = "hello"});
  }
  kvdesk::test::downgrade_to_version_1(path);
  {
    Database db(path, OpenMode::ReadOnly, 1000);
    REQUIRE(db.query_int("PRAGMA user_version") == 1);
  }
  ConversationStore store = ConversationStore::open(path);
  CHECK(store.conversation(id)->title == "Old chat");
  CHECK(store.conversation(id)->system_prompt == "Be brief.");
  CHECK(store.branch_path(id).size() == 1);
  CHECK(store.conversation_settings(id).empty());
  store.set_conversation_settings(id, some_settings());
  CHECK(store.conversation_settings(id) == some_settings());
  Database db(path, OpenMode::ReadOnly, 1000);
  CHECK(db.query_int("PRAGMA user_version") == kSchemaVersion);
}

TEST_CASE("conversation settings survive reopening and go with their conversation", "[app][store][settings]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId a = 0, b = 0;
  {
    ConversationStore store = ConversationStore::open(path);
    a = store.create_conversation("A");
    b = store.create_conversation("B");
    store.set_conversation_settings(a, some_settings());
    store.set_conversation_settings(b, ConversationSettings{.max_tokens = 3});
  }
  ConversationStore store = ConversationStore::open(path);
  CHECK(store.conversation_settings(a) == some_settings());
  const ConversationSettings only_max = store.conversation_settings(b);
  CHECK(only_max.max_tokens == 3);
  CHECK_FALSE(only_max.temperature.has_value());
  CHECK_FALSE(only_max.kv_retention.has_value());
  CHECK(settings_rows(path) == 2);

  store.set_conversation_settings(b, ConversationSettings{});
  CHECK(store.conversation_settings(b).empty());
  CHECK(settings_rows(path) == 1);
  store.delete_conversation(a);
  CHECK(settings_rows(path) == 0);
  CHECK_THROWS_AS(store.set_conversation_settings(a, some_settings()), kvdesk::Error);
  CHECK(settings_rows(path) == 0);
}

TEST_CASE("settings stored as text where numbers belong read as the app defaults", "[app][store][settings]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId id = 0;
  {
    ConversationStore store = ConversationStore::open(path);
    id = store.create_conversation("Edited by hand");
    store.set_conversation_settings(id, some_settings());
  }
  {
    Database db(path, OpenMode::ReadWrite, 1000);
    db.exec("UPDATE conversation_settings SET temperature = 'hot', max_tokens = x'00ff', kv_retention = x'01'");
  }
  ConversationStore store = ConversationStore::open(path);
  const ConversationSettings s = store.conversation_settings(id);
  CHECK_FALSE(s.temperature.has_value());
  CHECK_FALSE(s.max_tokens.has_value());
  CHECK_FALSE(s.kv_retention.has_value());
  CHECK(s.context_length == 128);
  CHECK(s.top_k == 12);
  CHECK(s.seed == 42);
}

TEST_CASE("a conversation's settings travel in its JSON export and come back on import", "[app][store][settings]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  const ConversationId id = store.create_conversation("Tuned");
  store.add_message({.conversation = id, .role = Role::User, .content = "hello"});
  store.set_conversation_settings(id, ConversationSettings{.max_tokens = 9, .temperature = 0.5, .kv_retention = "sinks"});
  const nlohmann::json j = conversation_to_json(store.load_tree(id));
  CHECK(j["settings"] == nlohmann::json{{"max_tokens", 9}, {"temperature", 0.5}, {"kv_retention", "sinks"}});
  const ConversationId copy = store.import_conversation(conversation_from_json(j));
  CHECK(store.conversation_settings(copy) == store.conversation_settings(id));

  nlohmann::json older = j;
  older.erase("settings");
  CHECK(store.conversation_settings(store.import_conversation(conversation_from_json(older))).empty());

  nlohmann::json wrong = j;
  wrong["settings"]["temperature"] = "hot";
  CHECK_THROWS_WITH(conversation_from_json(wrong), Catch::Contains("settings: 'temperature' must be a number"));
  wrong["settings"] = 3;
  CHECK_THROWS_WITH(conversation_from_json(wrong), Catch::Contains("settings: must be an object"));
  CHECK(store.list_conversations().size() == 3);
}
