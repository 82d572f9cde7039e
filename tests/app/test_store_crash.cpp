// Crash safety: child processes use the store as the app does and the parent SIGKILLs them at
// seeded random moments, then checks the database file.
//   Messages: a child saves a user message, then streams an answer with update_message every
//   ~20 ms. After each kill the database must pass integrity_check, hold every user message the
//   child reported as committed, and hold a prefix of the answer missing at most the last second
//   of generated text.
//   Saved KV: a child saves a conversation's KV over and over (save_kv_capped, as the app does
//   after each answer), numbered blobs of known bytes. After each kill the conversation's KV is
//   exactly the last one the child finished saving or the one it was saving, never a mix, and
//   every message and the other conversation's KV are as they were.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>
#include <thread>

#include "app/store/conversation_store.h"
#include "tests/test_support.h"

using namespace kvdesk::store;
using kvdesk::test::TempDir;
using Clock = std::chrono::steady_clock;   // CLOCK_MONOTONIC: the same clock in parent and child

namespace {

constexpr int kRounds = 24;
constexpr auto kSaveEvery = std::chrono::milliseconds(20);

std::string question(int round) { return "question " + std::to_string(round); }

// The answer of `round` after `n` pieces: deterministic, so the parent knows what was generated.
std::string answer_piece(int round, int i) { return "r" + std::to_string(round) + "w" + std::to_string(i) + " "; }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// One line through the pipe; a write of under PIPE_BUF bytes arrives whole or not at all.
void report(int fd, const std::string& line) {
  if (::write(fd, line.data(), line.size()) != ssize_t(line.size())) ::_exit(4);
}

// The child: what the app does when the user sends a message. Lines it reports:
//   U <id>            the user message is committed
//   A <id>            the (empty, streaming) answer row exists
//   G <bytes> <ns>    the answer has <bytes> bytes generated at time <ns>, about to be saved
//   S <bytes>         update_message returned: <bytes> bytes are saved
[[noreturn]] void child_main(const std::string& path, ConversationId conversation, int round, int fd) {
  try {
    ConversationStore store = ConversationStore::open(path, StoreOptions{.busy_timeout_ms = 5000});
    const std::vector<Message> branch = store.branch_path(conversation);
    std::optional<MessageId> parent;
    if (!branch.empty()) parent = branch.back().id;
    const std::string q = question(round);
    const MessageId user = store.add_message({.conversation = conversation, .parent = parent, .content = q});
    report(fd, "U " + std::to_string(user) + "\n");
    const MessageId answer = store.add_message(
        {.conversation = conversation, .parent = user, .role = Role::Assistant, .status = MessageStatus::Streaming});
    report(fd, "A " + std::to_string(answer) + "\n");
    std::string text;
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    for (int i = 0; Clock::now() < give_up; ++i) {
      text += answer_piece(round, i);
      report(fd, "G " + std::to_string(text.size()) + " " + std::to_string(now_ns()) + "\n");
      store.update_message(answer, text, MessageStatus::Streaming);
      report(fd, "S " + std::to_string(text.size()) + "\n");
      std::this_thread::sleep_for(kSaveEvery);
    }
  } catch (...) {
    ::_exit(1);
  }
  ::_exit(2);
}

// What the parent learned from one child before killing it.
struct Round {
  std::optional<MessageId> user;
  std::optional<MessageId> answer;
  std::vector<std::pair<size_t, int64_t>> generated;   // (bytes, when)
  size_t saved = 0;                                    // bytes update_message confirmed
  int64_t killed_at_ns = 0;
};

Round parse_reports(const std::string& lines) {
  Round r;
  std::istringstream in(lines);
  std::string kind;
  while (in >> kind) {
    if (kind == "U") {
      MessageId id = 0;
      in >> id;
      r.user = id;
    } else if (kind == "A") {
      MessageId id = 0;
      in >> id;
      r.answer = id;
    } else if (kind == "G") {
      size_t bytes = 0;
      int64_t when = 0;
      in >> bytes >> when;
      r.generated.emplace_back(bytes, when);
    } else if (kind == "S") {
      in >> r.saved;
    }
  }
  return r;
}

Round run_and_kill(const std::string& path, ConversationId conversation, int round, std::chrono::milliseconds delay) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    child_main(path, conversation, round, fds[1]);
  }
  ::close(fds[1]);
  std::this_thread::sleep_for(delay);
  const int64_t killed_at = now_ns();
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string lines;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) lines.append(buf, size_t(n));
  ::close(fds[0]);
  INFO("the child must die by the kill, not exit (exit code " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ")");
  REQUIRE(WIFSIGNALED(status));
  Round r = parse_reports(lines);
  r.killed_at_ns = killed_at;
  return r;
}

std::string generated_text(int round, size_t min_bytes) {
  std::string text;
  for (int i = 0; text.size() < min_bytes; ++i) text += answer_piece(round, i);
  return text;
}

void check_answer(ConversationStore& store, const Round& r, int round) {
  const std::optional<Message> answer = store.message(*r.answer);
  REQUIRE(answer.has_value());
  const std::string& saved = answer->content;
  size_t max_generated = 0;
  size_t generated_a_second_before = 0;
  for (const auto& [bytes, when] : r.generated) {
    max_generated = std::max(max_generated, bytes);
    if (when <= r.killed_at_ns - 1'000'000'000) generated_a_second_before = std::max(generated_a_second_before, bytes);
  }
  INFO("round " << round << ": saved " << saved.size() << " bytes, confirmed " << r.saved << ", generated "
                << max_generated);
  CHECK(saved.size() <= max_generated);
  CHECK(generated_text(round, max_generated).compare(0, saved.size(), saved) == 0);
  CHECK(saved.size() >= r.saved);
  CHECK(saved.size() >= generated_a_second_before);
  CHECK(answer->status == MessageStatus::Streaming);
}

}  // namespace

TEST_CASE("a store killed at random moments keeps committed messages and the streamed answer", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId conversation = 0;
  {
    ConversationStore store = ConversationStore::open(path);
    conversation = store.create_conversation("crash test");
  }
  // Mostly short rounds (some die before the user message commits); every tenth streams past the
  // one-second mark, so "missing at most the last second" is checked against real history.
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> short_ms(0, 450);
  std::uniform_int_distribution<int> long_ms(1300, 1600);
  std::vector<std::pair<MessageId, int>> committed;   // (user message, round)
  int rounds_streaming = 0;
  int rounds_past_a_second = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int delay_ms = round % 10 == 9 ? long_ms(rng) : short_ms(rng);
    const Round r = run_and_kill(path, conversation, round, std::chrono::milliseconds(delay_ms));
    if (r.user) committed.emplace_back(*r.user, round);
    {
      Database db(path, OpenMode::ReadWrite, 5000);
      INFO("round " << round);
      REQUIRE(db.query_text("PRAGMA integrity_check") == "ok");
    }
    ConversationStore store = ConversationStore::open(path);
    for (const auto& [id, asked_in] : committed) {
      const std::optional<Message> m = store.message(id);
      INFO("round " << round << ": user message " << id << " of round " << asked_in);
      REQUIRE(m.has_value());
      CHECK(m->content == question(asked_in));
      CHECK(m->role == Role::User);
    }
    if (r.answer) check_answer(store, r, round);
    rounds_streaming += r.saved > 0;
    rounds_past_a_second += !r.generated.empty() && r.generated.front().second <= r.killed_at_ns - 1'000'000'000;
  }
  CHECK(committed.size() >= kRounds / 2);
  CHECK(rounds_streaming >= kRounds / 3);
  CHECK(rounds_past_a_second >= 1);
}

namespace {

constexpr int kKvRounds = 16;
const std::string kKvKeys[2] = {"model a; kv f16/f16; block 16; template plain", "model a; kv q8_0/q8_0; block 16; template plain"};

// Blob n: its size and bytes follow from n alone (part noise, part pattern zstd can shrink), so
// the parent knows every blob a child may have written.
std::vector<uint8_t> kv_blob(int64_t n) {
  std::vector<uint8_t> bytes(size_t(192 * 1024 + (n % 7) * 37 * 1024 + n));
  std::mt19937 noise{uint32_t(n)};
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = i % 4 == 0 ? uint8_t(noise()) : uint8_t(i * n);
  return bytes;
}
const std::string& kv_key(int64_t n) { return kKvKeys[n % 2]; }

// The child: saves blobs first, first + 1, ... as the conversation's KV until killed. Lines:
//   B <n>   about to save blob n
//   D <n>   blob n is saved (committed)
[[noreturn]] void kv_child_main(const std::string& path, ConversationId conversation, int64_t first, int fd) {
  try {
    ConversationStore store = ConversationStore::open(path, StoreOptions{.busy_timeout_ms = 5000});
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    for (int64_t n = first; Clock::now() < give_up; ++n) {
      const std::vector<uint8_t> blob = kv_blob(n);
      report(fd, "B " + std::to_string(n) + "\n");
      store.save_kv_capped(conversation, kv_key(n), blob, int64_t(1) << 30);
      report(fd, "D " + std::to_string(n) + "\n");
    }
  } catch (...) {
    ::_exit(1);
  }
  ::_exit(2);
}

// The last blob the child began and the last it finished (-1: none).
struct KvRound {
  int64_t begun = -1;
  int64_t done = -1;
};

KvRound run_kv_child_and_kill(const std::string& path, ConversationId conversation, int64_t first,
                              std::chrono::milliseconds delay) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    kv_child_main(path, conversation, first, fds[1]);
  }
  ::close(fds[1]);
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string lines;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) lines.append(buf, size_t(n));
  ::close(fds[0]);
  INFO("the child must die by the kill, not exit (exit code " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ")");
  REQUIRE(WIFSIGNALED(status));
  KvRound r;
  std::istringstream in(lines);
  std::string kind;
  int64_t n = 0;
  while (in >> kind >> n) (kind == "B" ? r.begun : r.done) = n;
  return r;
}

// Every message of the conversation as text: what a KV save must never change.
std::string messages_of(ConversationStore& store, ConversationId id) {
  std::string out;
  for (const Message& m : store.load_tree(id).messages) {
    out += std::to_string(m.id) + "/" + std::string(status_name(m.status)) + "/" + m.content + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("a KV save killed at random moments leaves the old KV or the new one, and the messages", "[app][store]") {
  TempDir dir;
  const std::string path = dir.file("kvdesk.db");
  ConversationId conversation = 0;
  ConversationId other = 0;
  std::string conversation_messages;
  std::string other_messages;
  {
    ConversationStore store = ConversationStore::open(path);
    conversation = store.create_conversation("saving", "Be brief.");
    other = store.create_conversation("bystander");
    for (ConversationId c : {conversation, other}) {
      const MessageId u = store.add_message({.conversation = c, .parent = std::nullopt, .content = "question"});
      store.add_message({.conversation = c, .parent = u, .role = Role::Assistant, .content = "answer"});
    }
    store.save_kv(other, kv_key(1000), kv_blob(1000));
    conversation_messages = messages_of(store, conversation);
    other_messages = messages_of(store, other);
  }
  std::mt19937 rng(20240612);
  std::uniform_int_distribution<int> delay_ms(5, 400);
  int64_t saved = -1;      // the blob the database must hold (-1: none yet)
  int64_t next = 0;
  int rounds_with_saves = 0;
  for (int round = 0; round < kKvRounds; ++round) {
    const KvRound r = run_kv_child_and_kill(path, conversation, next, std::chrono::milliseconds(delay_ms(rng)));
    INFO("round " << round << ": began " << r.begun << ", finished " << r.done << ", held before " << saved);
    {
      Database db(path, OpenMode::ReadWrite, 5000);
      REQUIRE(db.query_text("PRAGMA integrity_check") == "ok");
    }
    ConversationStore store = ConversationStore::open(path);
    const std::optional<KvBlobInfo> info = store.kv_info(conversation);
    if (r.done >= 0) saved = r.done;
    if (!info) {
      CHECK(saved == -1);
    } else {
      const bool holds_begun = r.begun > r.done && info->key == kv_key(r.begun) &&
                               store.load_kv(conversation, info->key) == kv_blob(r.begun);
      if (holds_begun) saved = r.begun;
      REQUIRE(saved >= 0);
      CHECK(info->key == kv_key(saved));
      CHECK(store.load_kv(conversation, info->key) == kv_blob(saved));
    }
    CHECK(store.load_kv(other, kv_key(1000)) == kv_blob(1000));
    CHECK(messages_of(store, conversation) == conversation_messages);
    CHECK(messages_of(store, other) == other_messages);
    rounds_with_saves += r.done >= 0;
    next = std::max(r.begun, next) + 1;
  }
  CHECK(rounds_with_saves >= kKvRounds / 2);
}
