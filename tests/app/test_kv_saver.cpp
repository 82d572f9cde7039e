// KvSaver: conversations' KV written on the saver's own thread and connection: the newest save
// of a conversation is the one kept, nothing queued is lost at destruction, a failed save comes
// back as an outcome, and no save lands after forget().
#include <catch2/catch.hpp>

#include "app/chat/kv_saver.h"
#include "app/chat/saved_kv.h"
#include "app/store/conversation_store.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::TempDir;

namespace {

// A KV of `num_tokens` tokens whose bytes depend on `seed`.
ConversationKv kv_of(int32_t num_tokens, uint8_t seed) {
  ConversationKv kv;
  kv.identity = "model abc; kv f16/f16; block 16; template plain";
  for (int32_t i = 0; i < num_tokens; ++i) kv.tokens.push_back(i);
  kv.blocks.assign(size_t(num_tokens) * 64, seed);
  return kv;
}

std::vector<int32_t> saved_tokens(store::ConversationStore& store, store::ConversationId id) {
  const chat::SavedKv saved = chat::load_saved_kv(store, id);
  return saved.kv ? saved.kv->tokens : std::vector<int32_t>{};
}

// A scratch database with `count` conversations, open in the test's own connection.
struct Database {
  TempDir dir;
  std::string path = dir.file("kvdesk.db");
  store::ConversationStore store = store::ConversationStore::open(path);
  std::vector<store::ConversationId> ids;

  explicit Database(int count) {
    for (int i = 0; i < count; ++i) ids.push_back(store.create_conversation("c" + std::to_string(i)));
  }
};

}  // namespace

TEST_CASE("the KV saver writes in the background and keeps the newest save of a conversation", "[app][chat][kv_saver]") {
  Database db(2);
  store::ConversationStore& store = db.store;
  const store::ConversationId a = db.ids[0], b = db.ids[1];
  chat::KvSaver saver(db.path);
  saver.save(a, kv_of(10, 1));
  saver.save(b, kv_of(20, 2));
  saver.save(a, kv_of(30, 3));
  saver.wait_idle();
  CHECK(saved_tokens(store, a).size() == 30);
  CHECK(saved_tokens(store, b).size() == 20);
  const std::vector<chat::KvSaver::Outcome> outcomes = saver.take_outcomes();
  CHECK(outcomes.size() >= 2);
  for (const chat::KvSaver::Outcome& o : outcomes) {
    CHECK(o.error.empty());
    CHECK(o.result.saved);
  }
  CHECK(saver.take_outcomes().empty());
}

TEST_CASE("the KV saver writes every waiting save before it is destroyed", "[app][chat][kv_saver]") {
  Database db(6);
  const std::vector<store::ConversationId>& ids = db.ids;
  {
    chat::KvSaver saver(db.path);
    for (size_t i = 0; i < ids.size(); ++i) saver.save(ids[i], kv_of(int32_t(100 + i), uint8_t(i)));
  }
  for (size_t i = 0; i < ids.size(); ++i) CHECK(saved_tokens(db.store, ids[i]).size() == 100 + i);
}

TEST_CASE("a failed save comes back as an outcome and no save lands after forget", "[app][chat][kv_saver]") {
  Database db(2);
  store::ConversationStore& store = db.store;
  const store::ConversationId kept = db.ids[0], deleted = db.ids[1];
  chat::KvSaver saver(db.path);
  saver.save(deleted, kv_of(40, 4));
  saver.save(kept, kv_of(50, 5));
  saver.forget(deleted);
  store.delete_conversation(deleted);
  saver.save(deleted + 100, kv_of(10, 6));   // no such conversation
  saver.wait_idle();
  int failed = 0;
  for (const chat::KvSaver::Outcome& o : saver.take_outcomes()) {
    if (o.conversation == deleted + 100) {
      CHECK_FALSE(o.error.empty());
      ++failed;
    } else {
      CHECK(o.error.empty());
    }
  }
  CHECK(failed == 1);
  CHECK_FALSE(store.kv_info(deleted).has_value());
  CHECK(saved_tokens(store, kept).size() == 50);
}
