// ConversationStore on a bad day: a locked, read-only, corrupt, foreign, newer or full database
// gives a kvdesk::Error that names the file and says what happened, and a refused file is left
// byte for byte as it was. Root ignores file modes, so as root the permission cases run in a
// child process that has become the unprivileged user "nobody".
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "app/store/conversation_store.h"
#include "app/store/schema.h"
#include "engine/error.h"
#include "tests/test_support.h"

using namespace kvdesk::store;
using kvdesk::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;
constexpr StoreOptions kQuickTimeout{.busy_timeout_ms = 200};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng());
  return s;
}

std::vector<std::string> folder_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A closed database with a few conversations spread over many pages.
void make_real_db(const std::string& path) {
  ConversationStore store = ConversationStore::open(path);
  for (int c = 0; c < 4; ++c) {
    const ConversationId id = store.create_conversation("conversation " + std::to_string(c));
    std::optional<MessageId> parent;
    for (int m = 0; m < 40; ++m) {
      parent = store.add_message({.conversation = id, .parent = parent, .role = m % 2 ? Role::Assistant : Role::User,
                                  .content = std::string(900, char('a' + m % 26))});
    }
  }
}

// The message of the kvdesk::Error `attempt` throws; "" when it succeeds.
std::string error_of(const std::function<void()>& attempt) {
  try {
    attempt();
    return "";
  } catch (const kvdesk::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception: ") + e.what();
  }
}

// error_of(attempt) run without root's power to ignore file modes: as "nobody" in a child
// process when the tests run as root, in this process otherwise.
std::string error_unprivileged(const std::function<void()>& attempt) {
  if (::geteuid() != 0) return error_of(attempt);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const bool dropped = ::setgid(kNobody) == 0 && ::setuid(kNobody) == 0;
    const std::string message = dropped ? error_of(attempt) : "could not become nobody";
    const ssize_t written = ::write(fds[1], message.data(), message.size());
    ::_exit(dropped && written == ssize_t(message.size()) ? 0 : 3);
  }
  ::close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(message);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  return message;
}

// Gives `path` to the user error_unprivileged runs as, with `mode`; puts the mode back when it dies
// (so TempDir can clean up when the tests do not run as root).
class Permissions {
 public:
  Permissions(const std::string& path, mode_t mode) : path_(path) {
    if (::geteuid() == 0) REQUIRE(::chown(path.c_str(), kNobody, kNobody) == 0);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
  }
  ~Permissions() { ::chmod(path_.c_str(), 0755); }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("a write waits for another program's lock then fails with a clear message", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  ConversationStore store = ConversationStore::open(path, kQuickTimeout);
  Database other(path, OpenMode::ReadWrite, 0);
  other.exec("BEGIN IMMEDIATE");
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { store.create_conversation("blocked"); });
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(150));
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("locked by another program"));
  CHECK(store.list_conversations().size() == 4);
  other.exec("ROLLBACK");
  CHECK(error_of([&] { store.create_conversation("now it works"); }).empty());
}

TEST_CASE("opening a database another program holds exclusively fails with a clear message", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  Database other(path, OpenMode::ReadWrite, 0);
  other.exec("PRAGMA locking_mode = EXCLUSIVE");
  other.exec("BEGIN EXCLUSIVE");
  other.exec("COMMIT");
  const std::string message = error_of([&] { ConversationStore::open(path, kQuickTimeout); });
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("locked by another program"));
}

TEST_CASE("a read-only database file is refused for writing and still opens read-only", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  const std::string before = file_bytes(path);
  Permissions writable_dir(dir.path().string(), 0755);
  Permissions read_only_file(path, 0444);
  const std::string message = error_unprivileged([&] { ConversationStore::open(path); });
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("read-only"));
  CHECK(error_unprivileged([&] {
          ConversationStore store = ConversationStore::open_read_only(path);
          if (store.list_conversations().size() != 4) throw kvdesk::Error("wrong listing");
        }).empty());
  CHECK(file_bytes(path) == before);
}

TEST_CASE("a database cannot be created in a read-only folder", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  Permissions read_only_dir(dir.path().string(), 0555);
  const std::string message = error_unprivileged([&] { ConversationStore::open(path); });
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("cannot open the file"));
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("an existing database in a read-only folder is refused with a clear message", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  const std::string before = file_bytes(path);
  Permissions writable_file(path, 0644);
  Permissions read_only_dir(dir.path().string(), 0555);
  const std::string message = error_unprivileged([&] { ConversationStore::open(path); });
  CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("read-only"));
  CHECK(file_bytes(path) == before);
}

TEST_CASE("a folder given as the database is refused as a folder", "[app][store]") {
  TempDir dir;
  const std::string folder = dir.path().string();
  CHECK_THAT(error_of([&] { ConversationStore::open(folder); }), Catch::Contains(folder + ": is a folder"));
  CHECK_THAT(error_of([&] { ConversationStore::open_read_only(folder); }), Catch::Contains(folder + ": is a folder"));
}

TEST_CASE("random bytes are refused as not a database and left unchanged", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  const std::string junk = GENERATE(random_bytes(65536, 1), std::string("just some text\n"));
  write_file(path, junk);
  CHECK_THAT(error_of([&] { ConversationStore::open(path); }),
             Catch::Contains(path) && Catch::Contains("not an SQLite database"));
  CHECK_THAT(error_of([&] { ConversationStore::open_read_only(path); }), Catch::Contains("not an SQLite database"));
  CHECK(file_bytes(path) == junk);
  CHECK(folder_listing(dir.path()) == std::vector<std::string>{"kvdesk.db"});
}

TEST_CASE("a truncated database is refused as corrupt and left unchanged", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  const std::string whole = file_bytes(path);
  REQUIRE(whole.size() > 40 * 4096);
  const size_t keep = GENERATE(size_t(4096 * 9), size_t(4096 * 20 + 1234));
  write_file(path, whole.substr(0, keep));
  CHECK_THAT(error_of([&] { ConversationStore::open(path); }), Catch::Contains(path) && Catch::Contains("corrupt"));
  CHECK_THAT(error_of([&] { ConversationStore::open_read_only(path); }), Catch::Contains("corrupt"));
  CHECK(file_bytes(path) == whole.substr(0, keep));
}

TEST_CASE("a database with damaged pages is refused as corrupt and left unchanged", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  std::string damaged = file_bytes(path);
  const std::string noise = random_bytes(4096 * 3, 2);
  damaged.replace(4096 * 8, noise.size(), noise);
  write_file(path, damaged);
  CHECK_THAT(error_of([&] { ConversationStore::open(path); }), Catch::Contains(path) && Catch::Contains("corrupt"));
  CHECK(file_bytes(path) == damaged);
}

TEST_CASE("an SQLite database of another program is refused and left unchanged", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("other.db");
  {
    Database db(path, OpenMode::ReadWrite, 0);
    db.exec("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO photos (name) VALUES ('cat')");
  }
  const std::string before = file_bytes(path);
  CHECK_THAT(error_of([&] { ConversationStore::open(path); }),
             Catch::Contains(path) && Catch::Contains("not a kvdesk database"));
  CHECK(file_bytes(path) == before);
}

TEST_CASE("a database from a newer kvdesk is refused and left unchanged", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  {
    Database db(path, OpenMode::ReadWrite, 0);
    db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  }
  const std::string before = file_bytes(path);
  CHECK_THAT(error_of([&] { ConversationStore::open(path); }),
             Catch::Contains(path) && Catch::Contains("newer kvdesk") && Catch::Contains("was left as it is"));
  CHECK_THAT(error_of([&] { ConversationStore::open_read_only(path); }), Catch::Contains("newer kvdesk"));
  CHECK(file_bytes(path) == before);
}

TEST_CASE("a kvdesk database whose schema version was lost is refused and left unchanged", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  for (const int version : {0, -1}) {
    {
      Database db(path, OpenMode::ReadWrite, 0);
      db.exec("PRAGMA user_version = " + std::to_string(version));
    }
    const std::string before = file_bytes(path);
    CHECK_THAT(error_of([&] { ConversationStore::open(path); }),
               Catch::Contains(path) && Catch::Contains("schema version " + std::to_string(version)) &&
                   Catch::Contains("was left as it is"));
    CHECK_THAT(error_of([&] { ConversationStore::open_read_only(path); }), Catch::Contains("the file is damaged"));
    CHECK(file_bytes(path) == before);
  }
}

TEST_CASE("a full disk fails the write with a clear message and loses nothing", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  make_real_db(path);
  int64_t pages = 0;
  {
    Database db(path, OpenMode::ReadOnly, 0);
    pages = db.query_int("PRAGMA page_count");
  }
  ConversationStore store = ConversationStore::open(path, StoreOptions{.max_page_count = pages + 4});
  const ConversationId c = store.create_conversation("small enough");
  const MessageId q = store.add_message({.conversation = c, .role = Role::User, .content = "short question"});
  const std::string huge(1 << 20, 'x');
  CHECK_THAT(error_of([&] { store.add_message({.conversation = c, .parent = q, .role = Role::Assistant, .content = huge}); }),
             Catch::Contains(path) && Catch::Contains("disk is full"));
  CHECK_THAT(error_of([&] { store.update_message(q, huge, MessageStatus::Complete); }), Catch::Contains("disk is full"));
  CHECK(store.message(q)->content == "short question");
  CHECK(store.branch_path(c).size() == 1);
  CHECK(error_of([&] { store.update_message(q, "short edit", MessageStatus::Complete); }).empty());
  {
    ConversationStore reopened = ConversationStore::open(path);
    CHECK(reopened.list_conversations().size() == 5);
    CHECK(reopened.message(q)->content == "short edit");
  }
}

TEST_CASE("a damaged saved KV blob is reported when loaded", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationStore store = ConversationStore::open(path);
  const ConversationId c = store.create_conversation("kv");
  const std::vector<uint8_t> kv(200000, 42);
  store.save_kv(c, "key", kv);
  {
    Database db(path, OpenMode::ReadWrite, 1000);
    db.exec("UPDATE conversation_kv SET data = substr(data, 1, length(data) - 8) || x'0102030405060708'");
  }
  CHECK_THAT(error_of([&] { store.load_kv(c, "key"); }), Catch::Contains(path) && Catch::Contains("KV cache is damaged"));
  store.clear_kv(c);
  CHECK_FALSE(store.load_kv(c, "key").has_value());
}

TEST_CASE("a saved KV blob whose recorded size disagrees with its frame is reported as damaged", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationStore store = ConversationStore::open(path);
  const ConversationId c = store.create_conversation("kv");
  std::mt19937 rng(5);
  std::vector<uint8_t> kv(3 << 20);   // compresses to more than one read piece
  for (uint8_t& b : kv) b = uint8_t(rng() % 16);
  store.save_kv(c, "key", kv);
  REQUIRE(store.kv_info(c)->stored_bytes > int64_t(1) << 20);
  CHECK(store.load_kv(c, "key") == kv);
  for (const char* change : {"num_bytes + 1", "num_bytes - 1"}) {
    {
      Database db(path, OpenMode::ReadWrite, 1000);
      db.exec(std::string("UPDATE conversation_kv SET num_bytes = ") + change);
    }
    CHECK_THAT(error_of([&] { store.load_kv(c, "key"); }), Catch::Contains("KV cache is damaged") && Catch::Contains("wrong size"));
    store.save_kv(c, "key", kv);
  }
}

TEST_CASE("a recorded size larger than the saved KV frame is refused before it is allocated", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationStore store = ConversationStore::open(path);
  const ConversationId compressed = store.create_conversation("zstd");
  const ConversationId raw = store.create_conversation("raw");
  std::mt19937 rng(7);
  std::vector<uint8_t> noise(5000);
  for (uint8_t& b : noise) b = uint8_t(rng());
  store.save_kv(compressed, "key", std::vector<uint8_t>(5000, 3));
  store.save_kv(raw, "key", noise);
  for (const char* size : {"1000000000000000", "-1"}) {
    {
      Database db(path, OpenMode::ReadWrite, 1000);
      db.exec(std::string("UPDATE conversation_kv SET num_bytes = ") + size);
    }
    for (const ConversationId c : {compressed, raw}) {
      CHECK_THAT(error_of([&] { store.load_kv(c, "key"); }), Catch::Contains("KV cache is damaged") && Catch::Contains("wrong size"));
    }
  }
}

TEST_CASE("messages whose parents form a loop are reported as damage, not followed forever", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationStore store = ConversationStore::open(path);
  for (const bool self_loop : {true, false}) {
    const ConversationId c = store.create_conversation("loop");
    const MessageId first = store.add_message({.conversation = c, .role = Role::User, .content = "hello"});
    const MessageId second = store.add_message({.conversation = c, .parent = first, .role = Role::Assistant, .content = "hi"});
    {
      Database db(path, OpenMode::ReadWrite, 1000);
      db.exec("UPDATE messages SET parent_id = " + std::to_string(self_loop ? first : second) +
              " WHERE id = " + std::to_string(first));
    }
    CHECK_THAT(error_of([&] { store.branch_path(c); }), Catch::Contains(path) && Catch::Contains("is its own ancestor"));
    // Following the newest children stops at a leaf or at the loop.
    const std::string newest = error_of([&] { store.newest_leaf_under(first); });
    CHECK((newest.empty() || newest.find("is its own ancestor") != std::string::npos));
    if (!self_loop) CHECK_THAT(newest, Catch::Contains("is its own ancestor"));
    store.delete_conversation(c);
    CHECK(store.message(second) == std::nullopt);
  }
}
