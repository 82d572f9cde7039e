// HttpServing: build the server's parts in dependency order, bind before the listener starts.
#include "app/gui/http_serving.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "engine/error.h"

namespace kvdesk::gui {
namespace {

// Requests the app's server lets wait at once; more get 503. Each holds an HTTP thread.
constexpr int32_t kMaxInFlight = 16;
constexpr int32_t kSpareHttpThreads = 8;   // /health, /metrics and /v1/kv probes beside them

void check(const ServeSettings& s) {
  if (s.port < 0 || s.port > 65535) throw Error("port " + std::to_string(s.port) + " is not a TCP port (0 to 65535)");
  if (s.host.empty()) throw Error("no address to listen on: 127.0.0.1 serves this machine only");
  if (!server::is_loopback_host(s.host) && s.api_key.empty()) {
    throw Error("serving on '" + s.host + "', which other machines can reach, needs an API key");
  }
}

server::ServeOptions serve_options(const ServeSettings& s) {
  server::ServeOptions o;   // on_chat_answered is the HttpServing's own
  o.host = s.host;
  o.port = s.port;
  o.api_key = s.api_key;
  o.http_threads = kMaxInFlight + kSpareHttpThreads;
  return o;   // model_id "": the loaded model's file name, whichever the window loads
}

}  // namespace

HttpServing::HttpServing(server::EngineShare& share, const ServeSettings& settings, bool model_loaded) {
  check(settings);
  client_ = share.connect([this] { doorbell_.ring(); });
  router_ = std::make_unique<server::RequestRouter>(*client_, doorbell_, metrics_, kMaxInFlight,
                                                    model_loaded ? server::ModelState::Loaded : server::ModelState::Loading);
  server::ServeOptions options = serve_options(settings);
  if (settings.keep_chats) {
    options.on_chat_answered = [this](server::ServedChat chat) {
      const std::lock_guard lock(answered_mutex_);
      answered_.push_back(std::move(chat));
    };
  }
  http_ = std::make_unique<server::HttpServer>(*client_, *router_, metrics_, std::move(options));
  url_ = server::server_url(settings.host, http_->bind());
  listener_ = std::thread([this] {
    http_->listen();
    listener_returned_ = true;
  });
}

HttpServing::~HttpServing() { stop(); }

void HttpServing::stop() {
  if (stopped_) return;
  stopped_ = true;
  router_->cancel_all();
  while (!http_->listening() && !listener_returned_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
  listener_.join();
}

ServingLoad HttpServing::load(const EngineStats& stats) const {
  ServingLoad load;
  for (RequestId id : router_->in_flight()) {
    const bool scheduled = std::any_of(stats.owners.begin(), stats.owners.end(),
                                       [id](const SequenceOwner& o) { return o.request == id; });
    ++(scheduled ? load.running : load.waiting);
  }
  load.ended = router_->ended();
  return load;
}

std::vector<server::ServedChat> HttpServing::take_answered_chats() {
  const std::lock_guard lock(answered_mutex_);
  return std::exchange(answered_, {});
}

}  // namespace kvdesk::gui
