// Conversations whose KV lives in the database: the saved-KV blob, the store's cap on all saved
// KV, and `kvdesk-cli chat` continuing a conversation in a second process from the saved KV,
// with a foreign or damaged KV refused (the reason reported) and the answer still right.
#include <catch2/catch.hpp>

#include <random>

#include "app/chat/chat_history.h"
#include "app/chat/saved_kv.h"
#include "app/store/conversation_store.h"
#include "app/store/sqlite_db.h"
#include "engine/error.h"
#include "tests/test_support.h"

using namespace kvdesk;
using kvdesk::test::model_path;
using kvdesk::test::run_cli;
using kvdesk::test::TempDir;

namespace {

ConversationKv sample_kv(int32_t num_tokens, size_t num_bytes) {
  ConversationKv kv;
  kv.identity = "model abc; kv f16/f16; block 16; template plain";
  for (int32_t i = 0; i < num_tokens; ++i) kv.tokens.push_back(i * 31 % 500);
  std::mt19937 noise(7);   // KV-like bytes that zstd cannot shrink much
  for (size_t i = 0; i < num_bytes; ++i) kv.blocks.push_back(uint8_t(noise()));
  return kv;
}

nlohmann::json chat_json(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"chat", "-m", model_path("stories260K.gguf"), "-n", "24", "--temp", "0", "-t", "2", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const test::CliRun run = run_cli(args);
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

constexpr const char* kFirst = "Once upon a time there was a little dog.";
constexpr const char* kSecond = "The dog went to the park.";

// The second turn's answer when nothing is restored: the same two turns (the second one with
// second_options), the saved KV cleared between.
std::string answer_without_saved_kv(const TempDir& dir, const std::vector<std::string>& second_options) {
  const std::string db = dir.file("reference.db");
  const int64_t id = chat_json({"--db", db, "--new", "-p", kFirst})["conversation_id"];
  store::ConversationStore::open(db).clear_kv(id);
  std::vector<std::string> second = {"--db", db, "--conversation", std::to_string(id), "-p", kSecond};
  second.insert(second.end(), second_options.begin(), second_options.end());
  const nlohmann::json j = chat_json(second);
  CHECK(j["cached_tokens"] == 0);
  CHECK(j["kv_source"] == "recomputed (no saved KV)");
  return j["text"];
}

}  // namespace

TEST_CASE("a saved KV blob round-trips and a damaged one is refused with a message", "[app][chat]") {
  const ConversationKv kv = sample_kv(37, 3000);
  const std::vector<uint8_t> blob = chat::encode_kv(kv);
  const ConversationKv back = chat::decode_kv(kv.identity, blob);
  CHECK(back.identity == kv.identity);
  CHECK(back.tokens == kv.tokens);
  CHECK(back.blocks == kv.blocks);

  std::vector<uint8_t> torn = blob;
  torn.erase(torn.begin() + 10);
  CHECK_THROWS_WITH(chat::decode_kv(kv.identity, torn), Catch::Contains("wrong size"));
  std::vector<uint8_t> foreign = blob;
  foreign[blob.size() - 28] = 'X';   // the header's magic, at the end
  CHECK_THROWS_WITH(chat::decode_kv(kv.identity, foreign), Catch::Contains("not a kvdesk KV blob"));
  std::vector<uint8_t> newer = blob;
  newer[blob.size() - 20] = 9;   // the version after the magic
  CHECK_THROWS_WITH(chat::decode_kv(kv.identity, newer), Catch::Contains("unknown layout version"));
  CHECK_THROWS_AS(chat::decode_kv(kv.identity, std::vector<uint8_t>{}), Error);
}

TEST_CASE("a KV blob saved with the header first (layout version 1) still loads", "[app][chat]") {
  const ConversationKv kv = sample_kv(21, 1000);
  const uint32_t version = 1;
  const uint64_t num_tokens = kv.tokens.size();
  const uint64_t num_block_bytes = kv.blocks.size();
  std::vector<uint8_t> blob;
  const auto append = [&blob](const void* bytes, size_t n) {
    blob.insert(blob.end(), static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + n);
  };
  append("kvdeskKV", 8);
  append(&version, sizeof version);
  append(&num_tokens, sizeof num_tokens);
  append(&num_block_bytes, sizeof num_block_bytes);
  append(kv.tokens.data(), kv.tokens.size() * sizeof(int32_t));
  append(kv.blocks.data(), kv.blocks.size());
  const ConversationKv back = chat::decode_kv(kv.identity, blob);
  CHECK(back.tokens == kv.tokens);
  CHECK(back.blocks == kv.blocks);
}

TEST_CASE("a stored conversation renders as its system prompt and active branch", "[app][chat]") {
  TempDir dir;
  store::ConversationStore store = store::ConversationStore::open(dir.file("kvdesk.db"));
  const store::ConversationId c = store.create_conversation(store::title_from("Hello there\nsecond line"), "Be brief.");
  const store::MessageId q = store.add_message({.conversation = c, .role = store::Role::User, .content = "Hi"});
  store.add_message({.conversation = c, .parent = q, .role = store::Role::Assistant, .content = "",
                     .status = store::MessageStatus::Streaming});
  const std::vector<ChatMessage> messages = chat::chat_messages(*store.conversation(c), store.branch_path(c));
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].role == "system");
  CHECK(messages[0].content == "Be brief.");
  CHECK(messages[1].role == "user");
  CHECK(messages[1].content == "Hi");
  CHECK(store.conversation(c)->title == "Hello there");
  CHECK(store::title_from("") == store::kNewChatTitle);
  // The cut at 40 bytes never splits a character or an emoji sequence.
  const std::string family = "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";   // 18 bytes
  CHECK(store::title_from(std::string(30, 'a') + family) == std::string(30, 'a') + "...");
  CHECK(store::title_from(std::string(22, 'a') + family + "tail") == std::string(22, 'a') + family + "...");
  const std::string korea = "\xF0\x9F\x87\xB0\xF0\x9F\x87\xB7";   // a flag: two regional indicators
  CHECK(store::title_from(std::string(34, 'a') + korea + "x") == std::string(34, 'a') + "...");
  CHECK(store::title_from(std::string(30, 'a') + korea + korea + "x") == std::string(30, 'a') + korea + "...");
  const std::string thumb = "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD";   // a thumb with a skin tone
  CHECK(store::title_from(std::string(37, 'a') + thumb) == std::string(37, 'a') + "...");
  CHECK(store::title_from(std::string(39, 'a') + "\xED\x95\x9C") == std::string(39, 'a') + "...");
}

TEST_CASE("saved KV stays within its cap, dropping the least recently saved first", "[app][store][chat]") {
  TempDir dir;
  store::ConversationStore store = store::ConversationStore::open(dir.file("kvdesk.db"));
  std::vector<store::ConversationId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(store.create_conversation("c" + std::to_string(i)));
  const ConversationKv kv = sample_kv(10, 4000);   // incompressible enough: about 4 KB stored
  const int64_t one = chat::save_conversation_kv(store, ids[0], kv).stored_bytes;
  REQUIRE(one > 3000);
  store.set_setting(chat::kKvCapSetting, std::to_string(3 * one));
  CHECK(chat::saved_kv_cap(store) == 3 * one);
  CHECK(chat::save_conversation_kv(store, ids[1], kv).dropped == 0);
  CHECK(chat::save_conversation_kv(store, ids[2], kv).dropped == 0);
  CHECK(chat::save_conversation_kv(store, ids[1], kv).dropped == 0);   // re-saving replaces its own
  const store::KvSaveResult fourth = chat::save_conversation_kv(store, ids[3], kv);
  CHECK(fourth.saved);
  CHECK(fourth.dropped == 1);
  CHECK_FALSE(store.kv_info(ids[0]).has_value());   // the least recently saved
  for (int i = 1; i < 4; ++i) CHECK(store.kv_info(ids[i]).has_value());
  CHECK(store.total_kv_bytes() <= 3 * one);
  CHECK(store.branch_path(ids[0]).empty());   // messages untouched (none were there)

  store.set_setting(chat::kKvCapSetting, std::to_string(one / 2));
  const store::KvSaveResult too_big = chat::save_conversation_kv(store, ids[3], kv);
  CHECK_FALSE(too_big.saved);
  CHECK(store.kv_info(ids[3]).has_value());   // the previous one stays
  store.set_setting(chat::kKvCapSetting, "not a number");
  CHECK(chat::saved_kv_cap(store) == chat::kDefaultKvCapBytes);

  const chat::SavedKv loaded = chat::load_saved_kv(store, ids[3]);
  REQUIRE(loaded.kv.has_value());
  CHECK(loaded.kv->tokens == kv.tokens);
  CHECK(loaded.kv->identity == kv.identity);
  CHECK(chat::load_saved_kv(store, ids[0]).why_not == "no saved KV");
}

TEST_CASE("chat continues a stored conversation in a new process from its saved KV", "[app][cli][chat]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  const nlohmann::json first = chat_json({"--db", db, "--new", "-p", kFirst});
  CHECK(first["kv_source"] == "recomputed (no saved KV)");
  CHECK(first["kv_saved"] == "saved");
  const int64_t id = first["conversation_id"];

  const nlohmann::json second = chat_json({"--db", db, "--conversation", std::to_string(id), "-p", kSecond});
  CHECK(second["kv_source"] == "database");
  // Everything the first turn left in the KV (its prompt and answer) is reused; only the new
  // user turn is computed.
  const int32_t history = first["prompt_tokens"].get<int32_t>() + first["generated_tokens"].get<int32_t>() - 1;
  CHECK(second["cached_tokens"].get<int32_t>() == history);
  CHECK(second["cached_tokens"].get<int32_t>() < second["prompt_tokens"].get<int32_t>());
  CHECK(second["text"] == answer_without_saved_kv(dir, {}));

  store::ConversationStore store = store::ConversationStore::open_read_only(db);
  const std::vector<store::Message> branch = store.branch_path(id);
  REQUIRE(branch.size() == 4);
  CHECK(branch[2].content == kSecond);
  CHECK(branch[3].content == second["text"]);
  CHECK(branch[3].status == store::MessageStatus::Complete);
}

TEST_CASE("chat refuses a KV saved under another KV type or block size and still answers right", "[app][cli][chat]") {
  const std::vector<std::string> other = GENERATE(std::vector<std::string>{"--kv-type", "int8"},
                                                  std::vector<std::string>{"--block-size", "32"});
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  const int64_t id = chat_json({"--db", db, "--new", "-p", kFirst})["conversation_id"];
  std::vector<std::string> next = {"--db", db, "--conversation", std::to_string(id), "-p", kSecond};
  next.insert(next.end(), other.begin(), other.end());
  const nlohmann::json j = chat_json(next);
  INFO(j["kv_source"]);
  CHECK_THAT(j["kv_source"].get<std::string>(), Catch::StartsWith("recomputed (") &&
                                                     (Catch::Contains("KV type") || Catch::Contains("block size")));
  CHECK(j["cached_tokens"] == 0);
  CHECK(j["text"] == answer_without_saved_kv(dir, other));
}

TEST_CASE("chat refuses a damaged saved KV with a message, answers and saves a good one", "[app][cli][chat]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  const int64_t id = chat_json({"--db", db, "--new", "-p", kFirst})["conversation_id"];
  {
    store::Database raw(db, store::OpenMode::ReadWrite, 1000);
    raw.exec("UPDATE conversation_kv SET data = substr(data, 1, length(data) / 2) || x'0102030405060708' || "
             "substr(data, length(data) / 2 + 9)");
  }
  const nlohmann::json j = chat_json({"--db", db, "--conversation", std::to_string(id), "-p", kSecond});
  CHECK_THAT(j["kv_source"].get<std::string>(), Catch::StartsWith("recomputed (") && Catch::Contains("damaged"));
  CHECK(j["cached_tokens"] == 0);
  CHECK(j["text"] == answer_without_saved_kv(dir, {}));
  CHECK(j["kv_saved"] == "saved");
  store::ConversationStore store = store::ConversationStore::open(db);
  CHECK(chat::load_saved_kv(store, id).kv.has_value());
  CHECK(store.branch_path(id).size() == 4);
}

TEST_CASE("conversations lists the others when one conversation's messages form a loop", "[app][cli][chat]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  const int64_t damaged = chat_json({"--db", db, "--new", "-p", kFirst})["conversation_id"];
  chat_json({"--db", db, "--new", "-p", kSecond});
  {
    store::Database raw(db, store::OpenMode::ReadWrite, 1000);
    raw.exec("UPDATE messages SET parent_id = id WHERE conversation_id = " + std::to_string(damaged));
  }
  const test::CliRun list = run_cli({"conversations", "--db", db, "--json"});
  INFO("stderr: " << list.err);
  REQUIRE(list.exit_code == 0);
  const nlohmann::json conversations = nlohmann::json::parse(list.out)["conversations"];
  REQUIRE(conversations.size() == 2);
  for (const nlohmann::json& c : conversations) {
    if (c["id"] == damaged) {
      CHECK_THAT(c["error"].get<std::string>(), Catch::Contains("is its own ancestor"));
    } else {
      CHECK(c["messages"].size() == 2);
    }
  }
  const test::CliRun chat = run_cli({"chat", "-m", model_path("stories260K.gguf"), "--db", db, "--conversation",
                                     std::to_string(damaged), "-p", kSecond, "-n", "4"});
  CHECK(chat.exit_code == 1);
  CHECK_THAT(chat.err, Catch::Contains("is its own ancestor"));
}

TEST_CASE("a new conversation whose first message cannot be stored is not left behind", "[app][cli][chat]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  chat_json({"--db", db, "--new", "-p", kFirst});
  {
    store::Database raw(db, store::OpenMode::ReadWrite, 1000);
    raw.exec("ALTER TABLE messages RENAME COLUMN content TO body");
  }
  const test::CliRun chat =
      run_cli({"chat", "-m", model_path("stories260K.gguf"), "--db", db, "--new", "-p", kSecond, "-n", "4"});
  CHECK(chat.exit_code == 1);
  CHECK_THAT(chat.err, Catch::Contains(db));
  store::Database raw(db, store::OpenMode::ReadOnly, 1000);
  CHECK(raw.query_int("SELECT count(*) FROM conversations") == 1);
}
