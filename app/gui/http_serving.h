// HttpServing: the desktop app's "Serve over HTTP". kvdesk serve's HttpServer, RequestRouter and
// ServingMetrics over the window's own engine, reached through a client of its EngineShare, so
// HTTP clients and the window share one model, one KV pool and one batch (as LM Studio's local
// server does). It listens on a thread of its own from construction until destruction.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/server/engine_share.h"
#include "app/server/http_server.h"
#include "app/server/prometheus_metrics.h"
#include "app/server/request_router.h"

namespace kvdesk::gui {

struct ServeSettings {
  std::string host = "127.0.0.1";
  int32_t port = 8080;         // 0: any free port
  std::string api_key;         // required when host is not loopback
  bool keep_chats = true;      // answered chats are kept for the window (take_answered_chats)
};

// Requests in flight on the server now, from the engine's statistics.
struct ServingLoad {
  int32_t running = 0;         // holding a sequence in the engine
  int32_t waiting = 0;         // in flight, not scheduled yet (queued or preempted)
  uint64_t ended = 0;          // ended since the server started
};

class HttpServing {
 public:
  // Binds at once. Throws kvdesk::Error saying why it cannot serve: a host other machines can
  // reach without an API key, a port out of range, an address in use or not this machine's.
  HttpServing(server::EngineShare& share, const ServeSettings& settings, bool model_loaded);
  // stop(), if not yet.
  ~HttpServing();
  HttpServing(const HttpServing&) = delete;
  HttpServing& operator=(const HttpServing&) = delete;

  const std::string& url() const { return url_; }
  ServingLoad load(const EngineStats& stats) const;
  // The chats answered since the last call, oldest first (none unless keep_chats).
  std::vector<server::ServedChat> take_answered_chats();
  // Cancels the requests in flight, stops listening and waits for the listener: after it, no
  // chat is answered any more, so take_answered_chats() gets the last of them.
  void stop();

 private:
  server::Doorbell doorbell_;
  server::ServingMetrics metrics_;
  std::unique_ptr<EngineClient> client_;             // the server's front end on the shared engine
  std::unique_ptr<server::RequestRouter> router_;
  std::unique_ptr<server::HttpServer> http_;
  std::string url_;
  std::atomic<bool> listener_returned_{false};
  bool stopped_ = false;
  std::mutex answered_mutex_;                        // guards answered_, filled by HTTP threads
  std::vector<server::ServedChat> answered_;
  std::thread listener_;
};

}  // namespace kvdesk::gui
