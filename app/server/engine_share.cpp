// EngineShare: routing by request id. A client's submit registers the id under the same lock
// every poll distributes under, so no event can be routed before its request is known.
#include "app/server/engine_share.h"

#include <algorithm>

namespace kvdesk::server {

class EngineShare::Client final : public EngineClient {
 public:
  Client(EngineShare& share, Inbox* inbox) : share_(share), inbox_(inbox) {}
  ~Client() override { share_.disconnect(inbox_); }

  RequestId submit(Request request) override { return share_.submit(inbox_, std::move(request)); }
  std::future<std::vector<int32_t>> tokenize(std::string text, bool add_special, bool parse_special) override {
    return share_.engine().tokenize(std::move(text), add_special, parse_special);
  }
  std::future<std::string> detokenize(std::vector<int32_t> ids) override {
    return share_.engine().detokenize(std::move(ids));
  }
  void cancel(RequestId request) override { share_.engine_.cancel(request); }
  std::vector<Event> poll_events() override { return share_.poll(inbox_); }
  EngineStats stats() const override { return share_.engine_.stats(); }
  // The whole engine's idleness: the other front ends' requests count too.
  bool wait_idle(std::chrono::milliseconds timeout) override { return share_.engine_.wait_idle(timeout); }

 private:
  EngineShare& share_;
  Inbox* const inbox_;
};

EngineShare::EngineShare() : engine_([this] { ring_all(); }) {}

EngineShare::~EngineShare() = default;

std::unique_ptr<EngineClient> EngineShare::connect(std::function<void()> wake) {
  auto inbox = std::make_unique<Inbox>();
  inbox->wake = std::move(wake);
  Inbox* raw = inbox.get();
  std::lock_guard<std::mutex> lock(mutex_);
  std::lock_guard<std::mutex> wake_lock(wake_mutex_);
  inboxes_.push_back(std::move(inbox));
  return std::make_unique<Client>(*this, raw);
}

void EngineShare::disconnect(Inbox* inbox) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = owner_.begin(); it != owner_.end();) {
    if (it->second != inbox) {
      ++it;
      continue;
    }
    engine_.cancel(it->first);
    it = owner_.erase(it);
  }
  std::lock_guard<std::mutex> wake_lock(wake_mutex_);
  std::erase_if(inboxes_, [inbox](const std::unique_ptr<Inbox>& i) { return i.get() == inbox; });
}

void EngineShare::ring_all() {
  std::lock_guard<std::mutex> lock(wake_mutex_);
  for (const std::unique_ptr<Inbox>& inbox : inboxes_) {
    if (inbox->wake) inbox->wake();
  }
}

// A request for several samples owns all its consecutive ids.
RequestId EngineShare::submit(Inbox* inbox, Request request) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int32_t samples = std::clamp(request.samples, 1, kMaxSamples);
  const RequestId id = engine_.submit(std::move(request));
  for (int32_t i = 0; i < samples; ++i) owner_[id + RequestId(i)] = inbox;
  return id;
}

std::vector<Event> EngineShare::poll(Inbox* inbox) {
  std::lock_guard<std::mutex> lock(mutex_);
  distribute();
  std::vector<Event> events;
  events.swap(inbox->events);
  return events;
}

void EngineShare::distribute() {
  std::vector<Inbox*> rung;
  for (Event& e : engine_.poll_events()) {
    if (e.request == 0) {
      for (const std::unique_ptr<Inbox>& inbox : inboxes_) {
        inbox->events.push_back(e);
        if (std::find(rung.begin(), rung.end(), inbox.get()) == rung.end()) rung.push_back(inbox.get());
      }
      continue;
    }
    const auto it = owner_.find(e.request);
    if (it == owner_.end()) continue;
    Inbox* inbox = it->second;
    if (e.kind == EventKind::Finished || e.kind == EventKind::Error) owner_.erase(it);
    inbox->events.push_back(std::move(e));
    if (std::find(rung.begin(), rung.end(), inbox) == rung.end()) rung.push_back(inbox);
  }
  // The engine rang everyone when these arrived, but an owner may have polled just before
  // this drain took its events: ring it again so it comes back for them.
  for (Inbox* inbox : rung) {
    if (inbox->wake) inbox->wake();
  }
}

}  // namespace kvdesk::server
