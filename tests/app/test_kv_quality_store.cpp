// ConversationStore's KV quality measurements: rows round trip by model and text, a new
// measurement replaces the old one, and a version 4 file gains the table with its chats intact.
#include <catch2/catch.hpp>

#include "app/store/conversation_store.h"
#include "app/store/schema.h"
#include "tests/app/old_database.h"
#include "tests/test_support.h"

using namespace kvdesk::store;
using kvdesk::test::TempDir;

namespace {

KvQualityRecord record(const std::string& model, const std::string& type, double kl, double top1) {
  return KvQualityRecord{.model_identity = model, .kv_type = type, .text_id = "lighthouse-128", .kl = kl, .top1 = top1, .tokens = 127};
}

}  // namespace

TEST_CASE("kv quality rows round trip by model and text and survive reopening", "[app][store][kv_quality]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  {
    ConversationStore store = ConversationStore::open(path);
    store.save_kv_quality(record("0123456789abcdef", "int8", 4.5e-5, 100));
    store.save_kv_quality(record("0123456789abcdef", "int4", 0.031, 93.7));
    store.save_kv_quality(record("fedcba9876543210", "int8", 0.5, 50));
  }
  ConversationStore store = ConversationStore::open(path);
  const std::vector<KvQualityRecord> rows = store.kv_quality("0123456789abcdef", "lighthouse-128");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].kv_type == "int4");
  CHECK(rows[0].kl == 0.031);
  CHECK(rows[0].top1 == 93.7);
  CHECK(rows[0].tokens == 127);
  CHECK(rows[0].model_identity == "0123456789abcdef");
  CHECK(rows[0].text_id == "lighthouse-128");
  CHECK(rows[1].kv_type == "int8");
  CHECK(rows[1].kl == 4.5e-5);
  CHECK(store.kv_quality("0123456789abcdef", "another-text").empty());
  CHECK(store.kv_quality("unknown", "lighthouse-128").empty());
}

TEST_CASE("a new kv quality measurement replaces the old one of the same model type and text", "[app][store][kv_quality]") {
  TempDir dir;
  ConversationStore store = ConversationStore::open(dir.file("kvdesk.db"));
  store.save_kv_quality(record("0123456789abcdef", "int8", 0.25, 80));
  store.save_kv_quality(record("0123456789abcdef", "int8", 4.5e-5, 100));
  const std::vector<KvQualityRecord> rows = store.kv_quality("0123456789abcdef", "lighthouse-128");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kl == 4.5e-5);
  CHECK(rows[0].top1 == 100);
}

TEST_CASE("a version 4 database opens migrated with an empty kv quality table", "[app][store][kv_quality]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId chat = 0;
  {
    ConversationStore store = ConversationStore::open(path);
    chat = store.create_conversation("kept");
    store.set_conversation_engine(chat, "in-process");
  }
  kvdesk::test::downgrade_to_version_4(path);
  {
    Database db(path, OpenMode::ReadOnly, 1000);
    REQUIRE(db.query_int("PRAGMA user_version") == 4);
    REQUIRE(db.query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'kv_quality'") == 0);
  }
  ConversationStore store = ConversationStore::open(path);
  CHECK(store.conversation(chat)->title == "kept");
  CHECK(store.conversation(chat)->engine == "in-process");
  CHECK(store.kv_quality("0123456789abcdef", "lighthouse-128").empty());
  store.save_kv_quality(record("0123456789abcdef", "f16", 1e-9, 100));
  CHECK(store.kv_quality("0123456789abcdef", "lighthouse-128").size() == 1);
  Database db(path, OpenMode::ReadOnly, 1000);
  CHECK(db.query_int("PRAGMA user_version") == kSchemaVersion);
}
