// RequestRouter: the one thread that drains the engine's poll_events() for the whole server and
// hands each request's events to that request's RequestStream, where the HTTP thread serving
// it waits. It also follows the model's loading, feeds ServingMetrics, and bounds how many
// requests may be in flight at once (--max-queue).
//
//   HTTP thread: submit() -> Engine -> wake() -> Doorbell -> router thread: poll_events()
//   -> RequestStream::push -> HTTP thread: RequestStream::next()
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/server/prometheus_metrics.h"
#include "engine/engine.h"

namespace kvdesk::server {

// The engine's wake callback rings it; the router's thread sleeps on it between drains.
class Doorbell {
 public:
  void ring();
  // Returns once rung (and clears it) or after timeout.
  void wait_for(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool rung_ = false;
};

// One request's events in the order the engine sent them; ends with a Finished or Error
// event for each of its samples (ids id() .. id() + samples() - 1).
class RequestStream {
 public:
  RequestStream(RequestId id, int32_t samples) : id_(id), samples_(samples) {}
  RequestId id() const { return id_; }
  int32_t samples() const { return samples_; }
  // The next event, or nullopt when none arrived within timeout.
  std::optional<Event> next(std::chrono::milliseconds timeout);
  void push(Event event);

 private:
  const RequestId id_;
  const int32_t samples_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Event> events_;
};

enum class ModelState { Loading, Loaded, Failed };

class RequestRouter {
 public:
  // initial: the model's state when the router starts (Loaded when it serves an engine whose
  // model was loaded before, as the desktop app's server does); ModelLoaded and load errors
  // update it from then on.
  RequestRouter(EngineClient& engine, Doorbell& doorbell, ServingMetrics& metrics, int32_t max_in_flight,
                ModelState initial = ModelState::Loading);
  ~RequestRouter();
  RequestRouter(const RequestRouter&) = delete;
  RequestRouter& operator=(const RequestRouter&) = delete;

  // Submits to the engine; the stream carries the events of every sample the request asks
  // for. Throws ApiError 503 when max_in_flight answers are in flight.
  std::shared_ptr<RequestStream> submit(Request request);
  // Ends a request early (its Finished event still follows): the client went away or a stop
  // string was found.
  void cancel(RequestId id);
  // Cancels a request whose client went away before its answer ended (counted as aborted).
  void abandon(RequestId id);
  // Cancels every request in flight (the server is stopping).
  void cancel_all();

  ModelState model_state() const;
  std::string load_error() const;
  // The requests in flight now, and how many have ended (answered, failed or cancelled) so far.
  std::vector<RequestId> in_flight() const;
  uint64_t ended() const;

 private:
  // A request from submit() until its Finished or Error event.
  struct Route {
    std::shared_ptr<RequestStream> stream;
    std::optional<std::chrono::steady_clock::time_point> last_token;   // for inter-token latency
  };

  void run();
  void route(Event event);
  void on_model_event(const Event& event);

  EngineClient& engine_;
  Doorbell& doorbell_;
  ServingMetrics& metrics_;
  const int32_t max_in_flight_;

  mutable std::mutex mutex_;               // guards everything below
  std::map<RequestId, Route> routes_;      // exactly the answers (samples) in flight
  ModelState model_state_ = ModelState::Loading;
  std::string load_error_;
  uint64_t ended_ = 0;
  bool stopping_ = false;

  std::thread thread_;                     // last: starts once the members above exist
};

}  // namespace kvdesk::server
