// KvSaver: one worker thread writing queued conversation KV through save_conversation_kv.
#include "app/chat/kv_saver.h"

#include <algorithm>
#include <utility>

#include "app/chat/saved_kv.h"

namespace kvdesk::chat {

KvSaver::KvSaver(std::filesystem::path database) : database_(std::move(database)), worker_([this] { run(); }) {}

KvSaver::~KvSaver() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void KvSaver::save(store::ConversationId conversation, ConversationKv kv) {
  {
    std::lock_guard lock(mutex_);
    const auto same = std::find_if(waiting_.begin(), waiting_.end(),
                                   [&](const Job& job) { return job.conversation == conversation; });
    if (same != waiting_.end()) {
      same->kv = std::move(kv);
    } else {
      waiting_.push_back({conversation, std::move(kv)});
    }
  }
  changed_.notify_all();
}

void KvSaver::forget(store::ConversationId conversation) {
  std::unique_lock lock(mutex_);
  std::erase_if(waiting_, [&](const Job& job) { return job.conversation == conversation; });
  changed_.wait(lock, [&] { return writing_ != conversation; });
}

void KvSaver::wait_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return waiting_.empty() && !writing_; });
}

std::vector<KvSaver::Outcome> KvSaver::take_outcomes() {
  std::lock_guard lock(mutex_);
  return std::exchange(outcomes_, {});
}

// Takes the oldest waiting job until stopping with none left.
void KvSaver::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
    if (waiting_.empty()) return;
    Job job = std::move(waiting_.front());
    waiting_.pop_front();
    writing_ = job.conversation;
    lock.unlock();
    Outcome outcome = write(job);
    lock.lock();
    writing_.reset();
    outcomes_.push_back(std::move(outcome));
    changed_.notify_all();
  }
}

KvSaver::Outcome KvSaver::write(const Job& job) {
  Outcome outcome;
  outcome.conversation = job.conversation;
  try {
    if (!store_) store_.emplace(store::ConversationStore::open(database_, {.verify_on_open = false}));
    outcome.result = save_conversation_kv(*store_, job.conversation, job.kv);
  } catch (const std::exception& e) {   // kvdesk::Error from the store, or no memory to compress into
    outcome.error = e.what();
  }
  return outcome;
}

}  // namespace kvdesk::chat
