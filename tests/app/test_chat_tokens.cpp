// Messages keep their token ids: a continued conversation is built from its messages' stored
// spans (an answer's generated ids, never its re-tokenized text), so it continues the KV token
// for token; ids of another model fall back to text; old databases migrate; damaged id blobs
// are reported and fall back, the messages untouched.
#include <catch2/catch.hpp>

#include <chrono>

#include "app/chat/chat_history.h"
#include "app/replay/replayer.h"
#include "app/store/conversation_store.h"
#include "app/store/schema.h"
#include "app/store/sqlite_db.h"
#include "engine/engine.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/app/old_database.h"
#include "tests/test_support.h"

using namespace kvdesk;
using namespace std::chrono_literals;
using kvdesk::test::model_path;
using kvdesk::test::run_cli;
using kvdesk::test::TempDir;

namespace {

constexpr const char* kFirst = "Once upon a time there was a little dog.";
constexpr const char* kSecond = "The dog went to the park.";
constexpr const char* kAnswer = " The little girl saw a big tree.";

// A loaded stories260K engine, and requests run one at a time to their Finished event.
class StoriesEngine {
 public:
  StoriesEngine() {
    EngineSettings s;
    s.model_path = model_path("stories260K.gguf");
    s.threads = 2;
    engine_.load_model(s);
    wait_for_model(engine_);
  }

  Event run(Request r) {
    const RequestId id = engine_.submit(std::move(r));
    REQUIRE(engine_.wait_idle(60s));
    for (Event& e : engine_.poll_events()) {
      if (e.request != id) continue;
      INFO(e.text);
      REQUIRE(e.kind != EventKind::Error);
      if (e.kind == EventKind::Finished) return e;
    }
    FAIL("no Finished event");
    return {};
  }

 private:
  Engine engine_;
};

// `text` as single-character tokens: a valid tokenization of it that is not the canonical one.
std::vector<int32_t> spelled_out(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) {
    int32_t found = -1;
    for (int32_t id = 0; id < tokenizer.vocab_size() && found < 0; ++id) {
      if (tokenizer.token_bytes(id) == std::string(1, c)) found = id;
    }
    REQUIRE(found >= 0);
    ids.push_back(found);
  }
  return ids;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

nlohmann::json chat_json(const std::vector<std::string>& extra, const std::string& model = "stories260K.gguf") {
  std::vector<std::string> args = {"chat", "-m", model_path(model), "-n", "16", "--temp", "0", "-t", "2", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const test::CliRun run = run_cli(args);
  INFO("stderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out);
}

// A conversation of two turns under one chat template, kept in db: the first question answered
// and stored, then the second asked of it.
struct TwoTurns {
  std::string db;
  int64_t id = 0;
  nlohmann::json first, second;
};

TwoTurns chat_two_turns(const TempDir& dir, const std::string& template_name) {
  TwoTurns t{dir.file("kvdesk.db")};
  t.first = chat_json({"--db", t.db, "--new", "--chat-template", template_name, "-p", kFirst});
  t.id = t.first["conversation_id"].get<int64_t>();
  t.second = chat_json({"--db", t.db, "--conversation", std::to_string(t.id), "--chat-template", template_name, "-p", kSecond});
  return t;
}

}  // namespace

TEST_CASE("a turn continues an answer from its stored ids even when its text tokenizes otherwise", "[app][chat][tokens]") {
  const auto file = GgufFile::open(model_path("stories260K.gguf"));
  const auto tokenizer = Tokenizer::from_gguf(*file);
  const std::vector<int32_t> answer_ids = spelled_out(*tokenizer, kAnswer);
  REQUIRE(answer_ids != tokenizer->encode(kAnswer, false));   // the text alone would give other tokens

  StoriesEngine engine;
  Request first;
  first.messages = {{"user", kFirst}};
  first.max_tokens = 8;
  const Event turn1 = engine.run(first);
  const ChatTokens& reported = turn1.chat_tokens;
  REQUIRE_THAT(reported.identity, Catch::StartsWith("model ") && Catch::Contains("; template plain "));
  REQUIRE(reported.messages.size() == 1);
  CHECK(int32_t(reported.messages[0].size()) == turn1.metrics.prompt_tokens);
  CHECK(int32_t(reported.answer.size()) == turn1.metrics.generated_tokens);
  const std::vector<int32_t> user_span = reported.messages[0];

  // A conversation whose KV holds the first turn with the spelled-out answer.
  Request park;
  park.prompt_tokens = concat(user_span, answer_ids);
  park.max_tokens = 1;
  park.conversation_key = 9;
  engine.run(park);

  Request next;
  next.messages = {{"user", kFirst}, {"assistant", kAnswer}, {"user", kSecond}};
  next.message_tokens = {{reported.identity, user_span}, {reported.identity, answer_ids}, {}};
  next.conversation_key = 9;
  next.max_tokens = 8;
  const Event turn2 = engine.run(next);
  const int32_t history = int32_t(user_span.size() + answer_ids.size());
  CHECK(turn2.chat_tokens.reused_messages == 2);
  REQUIRE(turn2.chat_tokens.messages.size() == 3);
  CHECK(turn2.chat_tokens.messages[1] == answer_ids);
  CHECK(turn2.metrics.cached_tokens == history);   // the KV continued token for token
  CHECK(turn2.metrics.prompt_tokens == history + int32_t(turn2.chat_tokens.messages[2].size()));

  SECTION("the same turn from text re-tokenizes the answer and loses the KV after the divergence") {
    park.conversation_key = 11;
    engine.run(park);
    next.message_tokens.clear();
    next.conversation_key = 11;
    const Event text = engine.run(next);
    CHECK(text.chat_tokens.reused_messages == 0);
    CHECK(text.metrics.cached_tokens < history);
  }
  SECTION("ids made with another model are ignored: the text stands in") {
    next.message_tokens = {{"model 0000; template plain", user_span}, {"model 0000; template plain", answer_ids}, {}};
    next.conversation_key = 0;
    CHECK(engine.run(next).chat_tokens.reused_messages == 0);
  }
  SECTION("regenerating takes every message from ids and forks the parked turn") {
    next.message_tokens[2] = {reported.identity, turn2.chat_tokens.messages[2]};
    const Event again = engine.run(next);
    CHECK(again.chat_tokens.reused_messages == 3);
    CHECK(again.metrics.prompt_tokens == turn2.metrics.prompt_tokens);
    CHECK(again.metrics.cached_tokens == again.metrics.prompt_tokens - 1);
  }
}

TEST_CASE("chat stores token ids and continues from them in a new process and another model falls back to text", "[app][cli][chat][tokens]") {
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  const nlohmann::json first = chat_json({"--db", db, "--new", "-p", kFirst});
  const int64_t id = first["conversation_id"];
  {
    store::ConversationStore store = store::ConversationStore::open_read_only(db);
    const std::vector<store::Message> branch = store.branch_path(id);
    REQUIRE(branch.size() == 2);
    REQUIRE(branch[0].tokens.has_value());
    REQUIRE(branch[1].tokens.has_value());
    CHECK(int64_t(branch[0].tokens->ids.size()) == first["prompt_tokens"].get<int64_t>());
    CHECK(branch[1].tokens->ids == first["tokens"].get<std::vector<int32_t>>());
  }
  const nlohmann::json second = chat_json({"--db", db, "--conversation", std::to_string(id), "-p", kSecond});
  CHECK(second["kv_source"] == "database");
  CHECK(second["messages_from_token_ids"] == 2);
  store::ConversationStore store = store::ConversationStore::open_read_only(db);
  const std::vector<store::Message> branch = store.branch_path(id);
  REQUIRE(branch.size() == 4);
  REQUIRE(branch[2].tokens.has_value());
  // Only the new user turn is computed (and an answer cut at its length limit's last token, which
  // was sampled but never fed back): the history is the KV's own tokens.
  const int64_t unfed = first["finish_reason"] == "length" ? 1 : 0;
  CHECK(second["cached_tokens"].get<int64_t>() ==
        second["prompt_tokens"].get<int64_t>() - int64_t(branch[2].tokens->ids.size()) - unfed);

  const nlohmann::json other = chat_json({"--db", db, "--conversation", std::to_string(id), "-p", kSecond}, "stories260K-Q8_0.gguf");
  CHECK(other["messages_from_token_ids"] == 0);
}

TEST_CASE("every chat template continues a stored conversation from its ids, answers it pads or trims included", "[app][cli][chat][tokens]") {
  for (const std::string& name : chat_template_names()) {
    // These render an earlier answer apart from how its generation prompt opened it (below).
    if (name == "deepseek-r1" || name == "qwen3-thinking" || name == "harmony") continue;
    DYNAMIC_SECTION(name) {
      TempDir dir;
      const TwoTurns t = chat_two_turns(dir, name);
      CHECK(t.second["messages_from_token_ids"] == 2);
      store::ConversationStore store = store::ConversationStore::open_read_only(t.db);
      const std::vector<store::Message> branch = store.branch_path(t.id);
      REQUIRE(branch.size() == 4);
      REQUIRE(branch[2].tokens.has_value());
      const int64_t unfed = t.first["finish_reason"] == "length" ? 1 : 0;
      CHECK(t.second["cached_tokens"].get<int64_t>() ==
            t.second["prompt_tokens"].get<int64_t>() - int64_t(branch[2].tokens->ids.size()) - unfed);
    }
  }
}

TEST_CASE("DeepSeek R1, Qwen3 thinking and harmony continue a stored conversation from the KV up to the answer they re-render", "[app][cli][chat][tokens]") {
  // Their generation prompt opens the answer with "<think>\n", which the template leaves out when
  // it renders that answer in the history: no message ends where the next prompt's text has it,
  // so the prompt comes from text, and the KV is kept up to where the two renderings part.
  for (const std::string name : {"deepseek-r1", "qwen3-thinking"}) {
    DYNAMIC_SECTION(name) {
      TempDir dir;
      const TwoTurns t = chat_two_turns(dir, name);
      CHECK(t.second["messages_from_token_ids"] == 0);
      CHECK(t.second["cached_tokens"].get<int64_t>() > 0);
      CHECK(t.second["cached_tokens"].get<int64_t>() < t.first["prompt_tokens"].get<int64_t>());
    }
  }
  // Harmony's generation prompt ends before the answer's channel, which the history writes as
  // "<|channel|>final<|message|>": the first prompt (its user message) comes from ids and stays
  // cached whole, the answer is computed again in its history form.
  SECTION("harmony") {
    TempDir dir;
    const TwoTurns t = chat_two_turns(dir, "harmony");
    CHECK(t.second["messages_from_token_ids"] == 1);
    CHECK(t.second["cached_tokens"].get<int64_t>() == t.first["prompt_tokens"].get<int64_t>());
  }
}

TEST_CASE("a version 1 database opens, migrates and its messages fall back to their text", "[app][store][tokens]") {
  TempDir dir;
  const std::string db = dir.file("old.db");
  store::ConversationId id = 0;
  {
    store::ConversationStore store = store::ConversationStore::open(db);
    id = store.create_conversation("old", "Be brief.");
    const store::MessageId u = store.add_message({.conversation = id, .parent = std::nullopt, .content = kFirst});
    store.add_message({.conversation = id, .parent = u, .role = store::Role::Assistant, .content = kAnswer});
  }
  test::downgrade_to_version_1(db);
  store::ConversationStore store = store::ConversationStore::open(db);
  const std::vector<store::Message> branch = store.branch_path(id);
  REQUIRE(branch.size() == 2);
  CHECK(branch[1].content == kAnswer);
  CHECK_FALSE(branch[0].tokens.has_value());
  CHECK(branch[0].tokens_damaged.empty());
  const chat::ChatTurn turn = chat::chat_turn(*store.conversation(id), branch);
  REQUIRE(turn.messages.size() == 3);
  CHECK(turn.tokens[2].ids.empty());
  CHECK(turn.message_ids == std::vector<store::MessageId>{0, branch[0].id, branch[1].id});

  const std::pair<store::MessageId, store::MessageTokens> update{branch[1].id, {"model x; template plain", {5, 6, 7}}};
  store.set_message_tokens({&update, 1});
  CHECK(store.message(branch[1].id)->tokens->ids == std::vector<int32_t>{5, 6, 7});
  CHECK(store::Database(db, store::OpenMode::ReadOnly, 1000).query_int("PRAGMA user_version") == store::kSchemaVersion);
}

TEST_CASE("a new system prompt drops the first message's ids, whose span holds the old one", "[app][store][tokens]") {
  TempDir dir;
  store::ConversationStore store = store::ConversationStore::open(dir.file("kvdesk.db"));
  const store::ConversationId id = store.create_conversation("c", "Be brief.");
  const store::MessageId u = store.add_message({.conversation = id, .parent = std::nullopt, .content = kFirst});
  const store::MessageId a = store.add_message({.conversation = id, .parent = u, .role = store::Role::Assistant, .content = kAnswer});
  const std::vector<std::pair<store::MessageId, store::MessageTokens>> ids = {{u, {"i", {1, 2}}}, {a, {"i", {3}}}};
  store.set_message_tokens(ids);
  store.set_system_prompt(id, "Be brief.");
  CHECK(store.message(u)->tokens.has_value());
  store.set_system_prompt(id, "Be verbose.");
  CHECK_FALSE(store.message(u)->tokens.has_value());
  CHECK(store.message(a)->tokens.has_value());
}

TEST_CASE("damaged token ids are reported, the text stands in and the turn stores good ones", "[app][cli][chat][tokens]") {
  const std::string damage = GENERATE(std::string("substr(token_ids, 1, length(token_ids) - 3)"),
                                      std::string("substr(token_ids, 1, 8) || x'0102' || substr(token_ids, 11)"),
                                      std::string("x'00'"));
  TempDir dir;
  const std::string db = dir.file("kvdesk.db");
  const int64_t id = chat_json({"--db", db, "--new", "-p", kFirst})["conversation_id"];
  std::string answer_text;
  {
    store::Database raw(db, store::OpenMode::ReadWrite, 1000);
    raw.exec("UPDATE messages SET token_ids = " + damage + " WHERE role = 'assistant'");
    answer_text = raw.query_text("SELECT content FROM messages WHERE role = 'assistant'");
  }
  {
    store::ConversationStore store = store::ConversationStore::open_read_only(db);
    const std::vector<store::Message> branch = store.branch_path(id);
    REQUIRE(branch.size() == 2);
    CHECK_FALSE(branch[1].tokens.has_value());
    CHECK_THAT(branch[1].tokens_damaged, Catch::Contains("message " + std::to_string(branch[1].id)) &&
                                             Catch::Contains("damaged") && Catch::Contains("text is used instead"));
    CHECK(branch[1].content == answer_text);
  }
  const nlohmann::json second = chat_json({"--db", db, "--conversation", std::to_string(id), "-p", kSecond});
  REQUIRE(second["token_ids_damaged"].size() == 1);
  CHECK(second["messages_from_token_ids"] == 1);   // the first user message's span still counts
  store::ConversationStore store = store::ConversationStore::open_read_only(db);
  const std::vector<store::Message> branch = store.branch_path(id);
  REQUIRE(branch.size() == 4);
  CHECK(branch[1].content == answer_text);
  CHECK(branch[3].tokens.has_value());
}

TEST_CASE("a stored conversation's turns show its chat template the day it began", "[app][store][tokens]") {
  TempDir dir;
  store::ConversationStore store = store::ConversationStore::open(dir.file("kvdesk.db"));
  const store::ConversationId id = store.create_conversation("c", "");
  store.add_message({.conversation = id, .parent = std::nullopt, .content = kFirst});
  const store::Conversation conversation = *store.conversation(id);
  REQUIRE(conversation.created_at_ms > 0);
  Request r;
  chat::set_chat(r, chat::chat_turn(conversation, store.branch_path(id)));
  CHECK(r.template_time == conversation.created_at_ms / 1000);
  CHECK(r.messages.size() == 1);
}
