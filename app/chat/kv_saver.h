// KvSaver: conversations' KV saved on a thread of its own, over its own connection to the
// database, so the end of an answer never waits for compressing and writing megabytes (a 4K-token
// conversation of an 8B model holds half a gigabyte of f16 KV). SQLite's WAL lets the caller's
// connection read meanwhile; a write of the caller's waits for the save's transaction, which
// holds only the already compressed blob.
//
// Invariants: saves are written one at a time in the order asked; a save of a conversation that
// is still waiting is replaced by a newer one (it holds the same history and more), so the last
// KV asked for is the one that stays. Nothing asked is lost: the destructor writes every save
// still waiting before it returns.
#pragma once
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/store/conversation_store.h"
#include "engine/engine_types.h"

namespace kvdesk::chat {

class KvSaver {
 public:
  // What became of one save: the store's result, or why it failed (a full disk, a lock held too
  // long by another program).
  struct Outcome {
    store::ConversationId conversation = 0;
    store::KvSaveResult result;
    std::string error;
  };

  explicit KvSaver(std::filesystem::path database);
  ~KvSaver();
  KvSaver(const KvSaver&) = delete;
  KvSaver& operator=(const KvSaver&) = delete;

  // Queues kv for the conversation (saved within saved_kv_cap, as save_conversation_kv does) and
  // returns at once.
  void save(store::ConversationId conversation, ConversationKv kv);
  // Drops the conversation's waiting save and waits for one being written, so the caller can
  // delete the conversation knowing no save of it follows.
  void forget(store::ConversationId conversation);
  // Blocks until every save asked so far is written.
  void wait_idle();
  // The outcomes since the last call, oldest first.
  std::vector<Outcome> take_outcomes();

 private:
  struct Job {
    store::ConversationId conversation = 0;
    ConversationKv kv;
  };

  void run();
  Outcome write(const Job& job);

  const std::filesystem::path database_;
  std::optional<store::ConversationStore> store_;   // the worker's connection, opened by its first save
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> waiting_;
  std::optional<store::ConversationId> writing_;
  std::vector<Outcome> outcomes_;
  bool stopping_ = false;
  std::thread worker_;   // last: starts once everything above is constructed
};

}  // namespace kvdesk::chat
