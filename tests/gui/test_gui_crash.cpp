// Crash safety of the real app: kvdesk (scripted mode, one Xvfb server for the whole test)
// streams long answers from a random-weight model and is SIGKILLed at random moments, 20
// times: three in four 0-1.5 s after the round's user message is committed (while the answer
// streams), one in four anywhere in start-up. After each kill: PRAGMA integrity_check is ok, every user message seen committed is
// still there, and an answer cut off by the kill was saved at most a second (the app's save
// interval, plus the slack of one slow frame) before the kill, so at most the last second of
// its text is lost. A last run restarts on the same database and finishes a new answer.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "app/store/conversation_store.h"
#include "app/store/sqlite_db.h"
#include "tests/test_support.h"

namespace {

using kvdesk::test::ChildProcess;
using kvdesk::test::TempDir;
namespace store = kvdesk::store;
using namespace std::chrono_literals;

constexpr int kKills = 20;
// The app saves a streaming answer once a second, checked once per frame.
constexpr int64_t kSaveIntervalMs = 1000;
constexpr int64_t kSlowFrameMs = 500;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One Xvfb server for every kvdesk this test starts; DISPLAY points at it while it lives.
class XServer {
 public:
  XServer() : display_(std::to_string(900 + ::getpid() % 90)),
              server_("Xvfb", {":" + display_, "-screen", "0", "1280x800x24", "-nolisten", "tcp"}) {
    const std::string socket = "/tmp/.X11-unix/X" + display_;
    for (int i = 0; i < 200 && !std::filesystem::exists(socket); ++i) std::this_thread::sleep_for(50ms);
    REQUIRE(std::filesystem::exists(socket));
    ::setenv("DISPLAY", (":" + display_).c_str(), 1);
  }
  ~XServer() {
    ::unsetenv("DISPLAY");
    ::kill(server_.pid(), SIGTERM);
    server_.wait();
  }

 private:
  std::string display_;
  ChildProcess server_;
};

// A model slow enough that an answer streams for seconds: a real 32000-token vocabulary,
// 8 layers of 256.
std::string make_slow_model(const TempDir& dir) {
  const std::string path = dir.file("slow.gguf");
  const auto run = kvdesk::test::run_cli({"make-model", "--vocab-from", kvdesk::test::model_path("tokenizer.model"),
                                          "--layers", "8", "--embd", "256", "--heads", "4", "--kv-heads", "4",
                                          "--ff", "768", "--ctx", "4096", "--type", "f16", "-o", path});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  return path;
}

void write_script(const std::string& path, int round, bool first) {
  std::ofstream out(path);
  out << (first ? "new_chat\n" : "select_conversation 1\n") << "send question " << round << "\nwait_answer\nquit\n";
}

// Waits until the user message `text` is committed (true) or the app has run for `limit`.
bool wait_for_user_message(const std::string& db, const std::string& text, std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < give_up) {
    if (std::filesystem::exists(db + "-shm")) {
      store::Database database(db, store::OpenMode::ReadOnly, 5000);
      if (database.query_int("SELECT count(*) FROM messages WHERE role = 'user' AND content = '" + text + "'") > 0) {
        return true;
      }
    }
    std::this_thread::sleep_for(30ms);
  }
  return false;
}

void check_integrity(const std::string& db) {
  store::Database database(db, store::OpenMode::ReadWrite, 5000);
  REQUIRE(database.query_text("PRAGMA integrity_check") == "ok");
}

}  // namespace

TEST_CASE("kvdesk killed at random moments while answering keeps every message and loses at most a second",
          "[gui][crash]") {
  TempDir dir;
  const std::string model = make_slow_model(dir);
  const std::string db = dir.file("kvdesk.db");
  {
    store::ConversationStore s = store::ConversationStore::open(db);
    s.set_setting("sampling.max_tokens", "3000");
    s.set_setting("sampling.temperature", "0");
  }
  XServer x;
  std::mt19937 rng(20261129);
  std::uniform_int_distribution<int> startup_ms(0, 1500);
  std::uniform_int_distribution<int> streaming_ms(0, 1500);
  std::map<std::string, store::MessageId> committed;   // user message text -> id, once seen
  std::set<store::MessageId> cut;   // answers found cut off by a kill

  for (int round = 0; round < kKills; ++round) {
    INFO("round " << round);
    const std::string script = dir.file("round.txt");
    write_script(script, round, store::ConversationStore::open(db).list_conversations().empty());
    ChildProcess app(KVDESK_APP_PATH, {"--model", model, "--db", db, "--script", script, "--threads", "1"});
    // Every fourth kill lands anywhere in start-up; the others while the answer streams.
    if (round % 4 == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(startup_ms(rng)));
    } else {
      INFO("stderr so far: " << app.stderr_so_far());
      REQUIRE(wait_for_user_message(db, "question " + std::to_string(round), 30s));
      std::this_thread::sleep_for(std::chrono::milliseconds(streaming_ms(rng)));
    }
    const int64_t killed_at = unix_ms();
    ::kill(app.pid(), SIGKILL);
    const kvdesk::test::CliRun run = app.wait();
    INFO("stderr: " << run.err);
    REQUIRE(run.exit_code == 128 + SIGKILL);

    check_integrity(db);
    store::ConversationStore s = store::ConversationStore::open(db);
    for (const auto& [text, id] : committed) {
      const std::optional<store::Message> m = s.message(id);
      REQUIRE(m.has_value());
      CHECK(m->content == text);
    }
    const std::vector<store::Conversation> conversations = s.list_conversations();
    if (conversations.empty()) continue;
    REQUIRE(conversations.size() == 1);
    for (const store::Message& m : s.load_tree(conversations[0].id).messages) {
      if (m.role == store::Role::User) committed.emplace(m.content, m.id);
      if (m.role != store::Role::Assistant || m.status != store::MessageStatus::Streaming) continue;
      // Left Streaming by an earlier kill, and this run was killed before marking it Interrupted.
      if (!cut.insert(m.id).second) continue;
      INFO("answer " << m.id << " of " << m.content.size() << " bytes saved " << killed_at - m.updated_at_ms
                     << " ms before the kill");
      CHECK(m.updated_at_ms >= killed_at - kSaveIntervalMs - kSlowFrameMs);
    }
  }
  CHECK(committed.size() >= kKills * 3 / 4);
  CHECK(cut.size() >= kKills / 2);

  store::ConversationStore::open(db).set_setting("sampling.max_tokens", "24");
  write_script(dir.file("last.txt"), kKills, false);
  const kvdesk::test::CliRun last =
      kvdesk::test::run_program(KVDESK_APP_PATH, {"--model", model, "--db", db, "--script", dir.file("last.txt")});
  INFO("stderr: " << last.err);
  REQUIRE(last.exit_code == 0);
  check_integrity(db);
  store::ConversationStore s = store::ConversationStore::open(db);
  const std::vector<store::Message> path = s.branch_path(s.list_conversations().at(0).id);
  REQUIRE(path.size() >= 2);
  CHECK(path[path.size() - 2].content == "question " + std::to_string(kKills));
  CHECK(path.back().status == store::MessageStatus::Complete);
  for (const store::Message& m : s.load_tree(path[0].conversation_id).messages) {
    CHECK(m.status != store::MessageStatus::Streaming);
  }
}
