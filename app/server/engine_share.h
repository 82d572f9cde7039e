// EngineShare: one in-process Engine driven by several front ends at once (the desktop window
// and its HTTP server, as LM Studio's local server shares the loaded model). Each front end
// gets a Client, an EngineClient of its own: what it submits runs in the one engine (one KV
// pool, one prefix cache, one batch), and its poll_events() returns only its own requests'
// events plus the model events (request 0) every client sees.
//
//   front end A: Client::submit -> Engine -> wake() -> every client's wake
//   any client's poll_events(): Engine::poll_events() -> each event to its owner's queue
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/engine.h"

namespace kvdesk::server {

class EngineShare {
 public:
  EngineShare();
  ~EngineShare();
  EngineShare(const EngineShare&) = delete;
  EngineShare& operator=(const EngineShare&) = delete;

  // What only the in-process engine does (load_model, reconfigure_kv, export/import, ...).
  Engine& engine() { return engine_; }

  // A new front end; wake is called (on any thread) whenever it may have events to drain.
  // The client must go before the share; dropping it cancels its requests still in flight.
  std::unique_ptr<EngineClient> connect(std::function<void()> wake);

 private:
  class Client;
  // A front end's routing state. Invariant: every RequestId in `owner` was returned by
  // Engine::submit to the client it names and has not yet had its Finished or Error event
  // routed; events of ids not in `owner` (a client that went away) are dropped.
  struct Inbox {
    std::function<void()> wake;
    std::vector<Event> events;   // routed to this client, not yet polled
  };

  void ring_all();
  // Drains the engine into the inboxes, ringing the owners of what arrived; the caller holds mutex_.
  void distribute();
  RequestId submit(Inbox* inbox, Request request);
  std::vector<Event> poll(Inbox* inbox);
  void disconnect(Inbox* inbox);

  // mutex_ guards the events and owner_; changing inboxes_ takes mutex_, then wake_mutex_.
  // ring_all (the engine thread) takes only wake_mutex_, so it never waits on a poll.
  std::mutex mutex_;
  std::mutex wake_mutex_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::map<RequestId, Inbox*> owner_;
  Engine engine_;                             // last: its thread may ring while the rest exists
};

}  // namespace kvdesk::server
